// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/controller-discovery/controller-discovery.module.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import { RabbitRetryModule } from '../../../../../lib/nestjs';
import { Module } from '@nestjs/common';
import { ControllerDiscoveryController } from './controller-discovery.controller';
import { SubmoduleModule } from './submodule/submodule.module';

const rabbitHost =
  process.env.NODE_ENV === 'ci' ? process.env.RABBITMQ_HOST : 'localhost';
const rabbitPort =
  process.env.NODE_ENV === 'ci' ? process.env.RABBITMQ_PORT : '5672';
const uri = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

@Module({
  imports: [
    RabbitRetryModule.forRootAsync({
      useFactory: () => ({
        exchanges: [
          {
            name: 'exchange2',
            type: 'topic',
          },
        ],
        url: uri,
        connectionInitOptions: { wait: true, reject: true, timeout: 3000 },
        enableControllerDiscovery: true,
      }),
    }),
    SubmoduleModule,
  ],
  controllers: [ControllerDiscoveryController],
  providers: [ControllerDiscoveryController],
})
export class ControllerDiscoveryModule {}
