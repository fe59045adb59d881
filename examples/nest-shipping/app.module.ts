import { type DynamicModule, Module } from '@nestjs/common';

import { DEFAULT_URL } from '../../lib';
import { RabbitRetryModule } from '../../lib/nestjs';
import { CarrierClient } from './carrier.client';
import { OrdersPublisher } from './orders.publisher';
import { ShipmentConsumer } from './shipment.consumer';
import { Ledger } from './story';

/** The shipping service. */
@Module({})
export class AppModule {
  /** The service with this carrier client and ledger (the demo's stub and bookkeeping). */
  static register(carrier: CarrierClient, ledger: Ledger): DynamicModule {
    return {
      module: AppModule,
      imports: [
        RabbitRetryModule.forRoot({
          url: process.env.AMQP_URL ?? DEFAULT_URL,
          connectionName: 'rabbit-retry-nest-demo',
        }),
      ],
      providers: [{ provide: CarrierClient, useValue: carrier }, { provide: Ledger, useValue: ledger }, ShipmentConsumer, OrdersPublisher],
    };
  }
}
