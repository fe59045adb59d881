// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/validation.pipe.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import { PipeTransform, Injectable } from '@nestjs/common';
import { RpcException } from './rpc/rpc-exception';

@Injectable()
export class ValidationPipe implements PipeTransform {
  transform(value: any) {
    if (value !== 42) {
      throw new RpcException('expected number as payload');
    }
    return value;
  }
}
