/**
 * Booting NestJS test modules quietly, and closing every one a test booted.
 */
import 'reflect-metadata';

import type { LoggerService, ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';

/** Keeps Nest's warnings and errors in `lines` instead of printing them. */
export class QuietLogger implements LoggerService {
  readonly lines: string[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.lines.push(String(message));
  }
  error(message: unknown): void {
    this.lines.push(String(message));
  }
}

const apps: TestingModule[] = [];

/** Compiles and bootstraps the module: consumers run when it resolves. {@link closeApps} closes it. */
export async function boot(metadata: ModuleMetadata): Promise<TestingModule> {
  const app = await Test.createTestingModule(metadata).setLogger(new QuietLogger()).compile();
  apps.push(app);
  await app.init();
  return app;
}

/** Closes every module {@link boot} started. */
export async function closeApps(): Promise<void> {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
}

/** The bootstrap's error (an Error saying so when it succeeded). */
export async function bootError(metadata: ModuleMetadata): Promise<Error & { code?: string; option?: string }> {
  return boot(metadata).then(
    () => new Error('the bootstrap succeeded'),
    (err: unknown) => err as Error,
  );
}
