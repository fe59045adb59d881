// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/named-connection/named-connection.module.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import { RabbitRetryModule } from '../../../../../lib/nestjs';
import { Module } from '@nestjs/common';
import { CONNECTION_NAME } from './named-connection.constants';
import { NamedConnectionController } from './named-connection.controller';

const rabbitHost =
  process.env.NODE_ENV === 'ci' ? process.env.RABBITMQ_HOST : 'localhost';
const rabbitPort =
  process.env.NODE_ENV === 'ci' ? process.env.RABBITMQ_PORT : '5672';
const uri = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

@Module({
  imports: [
    RabbitRetryModule.forRootAsync({
      useFactory: () => ({
        name: CONNECTION_NAME,
        exchanges: [
          {
            name: 'exchange3',
            type: 'topic',
          },
        ],
        url: uri,
        connectionInitOptions: { wait: true, reject: true, timeout: 3000 },
      }),
    }),
  ],
  controllers: [NamedConnectionController],
  providers: [NamedConnectionController],
})
export class NamedConnectionModule {}
