/*
 * Ported from nestjs/nest, integration/microservices/src/disconnected.controller.ts.
 * Copyright (c) 2017-present Kamil Mysliwiec, MIT License (see ../LICENSE).
 * Changes from upstream: __test__/peers/CHANGES.md.
 */
import { Body, Controller, InternalServerErrorException, Post, RequestTimeoutException } from '@nestjs/common';
import { Observable, throwError } from 'rxjs';
import { catchError, tap } from 'rxjs/operators';

import { RabbitRetryClient, type RabbitRetryClientOptions } from '../../../../lib/microservices';

@Controller()
export class DisconnectedClientController {
  @Post()
  call(@Body() options: RabbitRetryClientOptions): Observable<number> {
    const client = new RabbitRetryClient(options);
    return client.send<number, number[]>({ cmd: 'none' }, [1, 2, 3]).pipe(
      // tap(
      //   console.log.bind(console, 'data'),
      //   console.error.bind(console, 'error'),
      // ),
      catchError((error) => {
        const { code } = error?.err ?? error ?? { code: 'CONN_ERR' };
        return throwError(() =>
          code === 'ECONNREFUSED' ||
          code === 'CONN_ERR' ||
          code === 'ENOTFOUND' ||
          code === 'CONNECTION_REFUSED' ||
          error.message.includes('Connection is closed.')
            ? new RequestTimeoutException('ECONNREFUSED')
            : new InternalServerErrorException(),
        );
      }),
      tap({
        error: () => client.close(),
      }),
    );
  }
}
