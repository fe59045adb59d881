// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/rpc/rpc-exception.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
// https://github.com/nestjs/nest/blob/master/packages/microservices/exceptions/rpc-exception.ts
import { isObject, isString } from '@nestjs/common/utils/shared.utils';

export class RpcException extends Error {
  constructor(private readonly error: string | object) {
    super();
    this.initMessage();
  }

  public initMessage() {
    if (isString(this.error)) {
      this.message = this.error;
    } else if (
      isObject(this.error) &&
      isString((this.error as Record<string, any>).message)
    ) {
      this.message = (this.error as Record<string, any>).message;
    } else if (this.constructor.name) {
      const matchResult =
        this.constructor.name.match(/[A-Z][a-z]+|[0-9]+/g) ?? [];
      this.message = matchResult.join(' ');
    }
  }

  public getError(): string | object {
    return this.error;
  }
}
