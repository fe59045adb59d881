import { Injectable } from '@nestjs/common';

import type { Message } from '../../lib';
import { Consume, OnFailure } from '../../lib/nestjs';
import { CarrierError, type ShipmentOrder } from './carrier';
import { CarrierClient } from './carrier.client';
import { DELAYS, Ledger, PREFETCH, TOPOLOGY, formatPrice, log, validate } from './story';

/** Rates every requested shipment with the carrier. */
@Injectable()
export class ShipmentConsumer {
  constructor(
    private readonly carrier: CarrierClient,
    private readonly ledger: Ledger,
  ) {}

  @Consume({ queue: TOPOLOGY.queue, exchange: TOPOLOGY.exchange, routingKey: TOPOLOGY.routingKey, prefetch: PREFETCH })
  // Carrier failures pass; anything else is a bug another attempt will not fix.
  @OnFailure({ delays: DELAYS, retryable: (err) => err instanceof CarrierError })
  async rate(order: ShipmentOrder, msg: Message): Promise<void> {
    // A crash between republish and ack can deliver an order twice; rate it once.
    if (this.ledger.isDone(order.orderId)) return;
    const attempt = msg.attempt + 1;
    this.ledger.attempted(order.orderId, attempt);
    validate(order);
    const quote = await this.carrier.rate(order);
    this.ledger.moved(order.orderId, 'done');
    log(order.orderId, 'done', `attempt ${attempt}: rated ${formatPrice(quote)}`);
  }
}
