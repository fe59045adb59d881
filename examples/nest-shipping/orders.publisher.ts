import { randomUUID } from 'node:crypto';

import { Injectable } from '@nestjs/common';

import type { RabbitRetry } from '../../lib';
import { InjectRabbitRetry } from '../../lib/nestjs';
import type { ShipmentOrder } from './carrier';
import { TOPOLOGY } from './story';

/** Publishes shipment requests, as the shop's checkout would. */
@Injectable()
export class OrdersPublisher {
  constructor(@InjectRabbitRetry() private readonly rr: RabbitRetry) {}

  /** Resolves once the broker confirmed the order. */
  async publish(order: ShipmentOrder): Promise<void> {
    await this.rr.publish(TOPOLOGY.exchange, TOPOLOGY.routingKey, order, {
      messageId: `order-${order.orderId}`,
      correlationId: randomUUID(),
      type: 'shipment.requested',
      appId: 'rabbit-retry-nest-demo',
    });
  }
}
