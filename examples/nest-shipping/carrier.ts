/**
 * A stand-in for a carrier's rate API: down for the first seconds of a run,
 * then back, with one order it can never rate in time.
 */

/** A shipment as the shop publishes it on `shipment.requested`. */
export interface ShipmentOrder {
  orderId: number;
  weightKg: number;
  address: {
    /** ISO 3166 country code; the carrier cannot rate an order without it. */
    country?: string;
    postcode: string;
    city: string;
  };
}

/** The carrier's answer for one order. */
export interface Quote {
  orderId: number;
  service: string;
  priceCents: number;
  currency: string;
}

/** The carrier failed to rate an order; a later attempt may succeed. */
export class CarrierError extends Error {
  constructor(
    message: string,
    /** The HTTP status the carrier answered, or 504 when it never did. */
    readonly status: number,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The carrier answered 503: its rate API is down. */
export class CarrierUnavailableError extends CarrierError {
  constructor() {
    super('carrier rate API answered 503 Service Unavailable', 503);
  }
}

/** The carrier took too long to answer. */
export class CarrierTimeoutError extends CarrierError {
  constructor(afterMs: number) {
    super(`carrier rate API did not answer within ${afterMs} ms`, 504);
  }
}

/** How the stub behaves. */
export interface CarrierStubOptions {
  /** When the outage starts (`Date.now()` milliseconds); it starts at once by default. */
  startedAt?: number;
  /** How long the rate API answers 503. */
  outageMs: number;
  /** Orders the carrier never rates in time, whatever its state. */
  timesOutOn?: readonly number[];
  /** How long a call takes. @default 100 */
  latencyMs?: number;
  /** How long a call waits before it gives up on the carrier. @default 400 */
  timeoutMs?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The carrier's rate API, with a scripted outage; counts the calls it takes. */
export class CarrierStub {
  /** Every call to {@link rate}. */
  calls = 0;
  /** The calls made while the carrier was down. */
  callsDuringOutage = 0;

  private readonly callsPerOrder = new Map<number, number>();
  private readonly outageMs: number;
  private backAt: number;
  private readonly timesOutOn: ReadonlySet<number>;
  private readonly latencyMs: number;
  private readonly timeoutMs: number;

  constructor(options: CarrierStubOptions) {
    this.outageMs = options.outageMs;
    this.backAt = (options.startedAt ?? Date.now()) + options.outageMs;
    this.timesOutOn = new Set(options.timesOutOn ?? []);
    this.latencyMs = options.latencyMs ?? 100;
    this.timeoutMs = options.timeoutMs ?? 400;
  }

  /** Starts the outage (again) at `at`: the rate API is down for `outageMs` from then. */
  startOutage(at: number = Date.now()): void {
    this.backAt = at + this.outageMs;
  }

  /** When the rate API answers again (`Date.now()` milliseconds). */
  get recoversAt(): number {
    return this.backAt;
  }

  /** Whether the rate API is down now. */
  get down(): boolean {
    return Date.now() < this.backAt;
  }

  /** How many times `orderId` was rated. */
  callsFor(orderId: number): number {
    return this.callsPerOrder.get(orderId) ?? 0;
  }

  /**
   * Rates a shipment. Rejects with a {@link CarrierUnavailableError} during
   * the outage and a {@link CarrierTimeoutError} for the orders it cannot rate.
   */
  async rate(order: ShipmentOrder): Promise<Quote> {
    this.calls += 1;
    this.callsPerOrder.set(order.orderId, this.callsFor(order.orderId) + 1);
    if (this.down) {
      this.callsDuringOutage += 1;
      await sleep(this.latencyMs);
      throw new CarrierUnavailableError();
    }
    if (this.timesOutOn.has(order.orderId)) {
      await sleep(this.timeoutMs);
      throw new CarrierTimeoutError(this.timeoutMs);
    }
    await sleep(this.latencyMs);
    return { orderId: order.orderId, service: 'standard', priceCents: 450 + Math.round(order.weightKg * 120), currency: 'EUR' };
  }
}
