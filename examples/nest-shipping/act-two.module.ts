/**
 * The second act's two services: the same shipping consumer, once with retry
 * queues only and once with the retry table behind one retry queue.
 */
import { type DynamicModule, Injectable, Module } from '@nestjs/common';

import { DEFAULT_URL, type Message } from '../../lib';
import { Consume, OnFailure, RabbitRetryModule } from '../../lib/nestjs';
import { CarrierError, type ShipmentOrder } from './carrier';
import { CarrierClient } from './carrier.client';
import { A_DELAYS, B_DELAYS, B_DUE_IN_MS, DEPENDENCY, OrderBook, PREFETCH, TABLE_RATE_PER_SEC, TOPOLOGY_2 as T } from './act-two.story';

const AMQP_URL = process.env.AMQP_URL ?? DEFAULT_URL;
const isCarrierError = (err: unknown) => err instanceof CarrierError;

/** Rates an order once; a crash between republish and ack can deliver it twice. */
async function rateOnce(carrier: CarrierClient, book: OrderBook, order: ShipmentOrder): Promise<void> {
  if (book.isDone(order.orderId)) return;
  book.tried(order.orderId);
  await carrier.rate(order);
  book.moved(order.orderId, 'done');
}

/** Service A: retry queues, then parked; an operator replays what parked. */
@Injectable()
export class QueuesOnlyConsumer {
  constructor(
    private readonly carrier: CarrierClient,
    private readonly book: OrderBook,
  ) {}

  @Consume({ queue: T.a.queue, exchange: T.exchange, routingKey: T.routingKey, prefetch: PREFETCH })
  @OnFailure({ delays: A_DELAYS, retryable: isCarrierError })
  rate(order: ShipmentOrder, _msg: Message): Promise<void> {
    return rateOnce(this.carrier, this.book, order);
  }
}

/** Service B: one retry queue, then a row in the retry table that waits on the carrier. */
@Injectable()
export class RetryTableConsumer {
  constructor(
    private readonly carrier: CarrierClient,
    private readonly book: OrderBook,
  ) {}

  @Consume({ queue: T.b.queue, exchange: T.exchange, routingKey: T.routingKey, prefetch: PREFETCH })
  @OnFailure({
    delays: B_DELAYS,
    retryable: isCarrierError,
    table: {
      dependency: () => DEPENDENCY,
      nextAttemptAt: () => new Date(Date.now() + B_DUE_IN_MS),
    },
  })
  rate(order: ShipmentOrder, _msg: Message): Promise<void> {
    return rateOnce(this.carrier, this.book, order);
  }
}

/** Service A's application. */
@Module({})
export class QueuesOnlyModule {
  static register(carrier: CarrierClient, book: OrderBook): DynamicModule {
    return {
      module: QueuesOnlyModule,
      imports: [RabbitRetryModule.forRoot({ url: AMQP_URL, connectionName: 'rabbit-retry-nest-demo-act2-queues' })],
      providers: [{ provide: CarrierClient, useValue: carrier }, { provide: OrderBook, useValue: book }, QueuesOnlyConsumer],
    };
  }
}

/** Service B's application, with the retry table in PostgreSQL at `tableUrl`. */
@Module({})
export class RetryTableModule {
  static register(carrier: CarrierClient, book: OrderBook, tableUrl: string): DynamicModule {
    return {
      module: RetryTableModule,
      imports: [
        RabbitRetryModule.forRoot({
          url: AMQP_URL,
          connectionName: 'rabbit-retry-nest-demo-act2-table',
          retryTable: { url: tableUrl, ratePerSec: TABLE_RATE_PER_SEC },
        }),
      ],
      providers: [{ provide: CarrierClient, useValue: carrier }, { provide: OrderBook, useValue: book }, RetryTableConsumer],
    };
  }
}
