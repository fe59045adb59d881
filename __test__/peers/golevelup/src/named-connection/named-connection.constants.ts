// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/named-connection/named-connection.constants.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
export const CONNECTION_NAME = 'test-connection';
