// Ported from github.com/golevelup/nestjs (af1c8d7), integration/rabbitmq/src/controller-discovery/submodule/submodule.module.ts.
// (The MIT License) Copyright (c) 2019 Jesse Carter. Changes from upstream: __test__/peers/CHANGES.md.
import { Module } from '@nestjs/common';
import { SubmoduleController } from './submodule.controller';

@Module({
  providers: [SubmoduleController],
})
export class SubmoduleModule {}
