import { type ArgumentsHost, Catch, type ExceptionFilter, type HttpServer } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { BaseRpcExceptionFilter } from '@nestjs/microservices';
import { type Observable, throwError } from 'rxjs';

import { InvalidOptionsError } from '../errors';
import { RabbitRetryContext } from './context';

/**
 * An exception filter that hands a {@link RabbitRetryServer} handler's error
 * to the transport as it was thrown, so the failure path records the error
 * itself (its class, message and stack in `retry-error-name`,
 * `retry-last-error` and `retry-error-stack`), a `NonRetryableError` parks at
 * once, and `onFailure.retryable` sees the error the handler threw. Without
 * it, Nest's default filter turns every error that is not an RpcException
 * into `{ status: 'error', message: 'Internal server error' }` before the
 * transport sees it. A caller is still answered as Nest would answer it.
 * Errors of other transports go to Nest's default RPC filter.
 *
 * ```ts
 * const app = await NestFactory.createMicroservice(AppModule, { strategy: new RabbitRetryServer({ queue: 'orders' }) });
 * app.useGlobalFilters(new RabbitRetryExceptionFilter());
 * ```
 *
 * In a hybrid application whose microservice shares the application's
 * configuration (`connectMicroservice(options, { inheritAppConfig: true })`),
 * HTTP errors reach it too: give it the HTTP adapter, and it hands them to
 * Nest's default HTTP filter:
 * `app.useGlobalFilters(new RabbitRetryExceptionFilter(app.getHttpAdapter()))`.
 */
export class RabbitRetryExceptionFilter implements ExceptionFilter {
  readonly #rpc = new BaseRpcExceptionFilter();
  readonly #http?: BaseExceptionFilter;

  /** `httpAdapter`: the application's (`app.getHttpAdapter()`), when HTTP errors reach this filter too. */
  constructor(httpAdapter?: HttpServer) {
    if (httpAdapter !== undefined) this.#http = new BaseExceptionFilter(httpAdapter);
  }

  /**
   * Passes the error on for a RabbitRetryServer handler; hands any other RPC
   * error to Nest's default RPC filter, and an HTTP error to Nest's default
   * HTTP filter.
   */
  catch(exception: unknown, host: ArgumentsHost): Observable<never> | undefined {
    const type = host.getType();
    if (type === 'rpc') {
      if (host.switchToRpc().getContext() instanceof RabbitRetryContext) return throwError(() => exception);
      return this.#rpc.catch(exception, host) as Observable<never>;
    }
    if (this.#http) {
      this.#http.catch(exception, host);
      return;
    }
    throw new InvalidOptionsError(
      `RabbitRetryExceptionFilter caught an error of a '${type}' context without an HTTP adapter: register it as new RabbitRetryExceptionFilter(app.getHttpAdapter()), or on the microservice only`,
    );
  }
}

// Applied as a call: the package compiles without `experimentalDecorators`.
Catch()(RabbitRetryExceptionFilter);
