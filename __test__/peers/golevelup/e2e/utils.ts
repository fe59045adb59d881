// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/e2e/utils.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
export const RABBIT_HOST =
  process.env.NODE_ENV === 'ci' ? process.env.RABBITMQ_HOST! : 'localhost';

export const RABBIT_PORT =
  process.env.NODE_ENV === 'ci' ? Number(process.env.RABBITMQ_PORT) : 5672;

export const getRabbitMQUri = (): string =>
  process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
