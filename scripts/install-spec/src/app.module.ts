// The project as `nest new` would leave it, before rabbit-retry: one module, one service.
import { Injectable, Module } from '@nestjs/common';

@Injectable()
export class AppService {
  getHello(): string {
    return 'Hello World!';
  }
}

@Module({ providers: [AppService], exports: [AppService] })
export class AppModule {}
