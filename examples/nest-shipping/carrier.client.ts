import type { Quote, ShipmentOrder } from './carrier';

/**
 * The carrier's rate API as the service sees it. An abstract class, so it is
 * both the type and the injection token; the demo provides the
 * CarrierStub for it, with its scripted outage.
 */
export abstract class CarrierClient {
  /** Rates a shipment; rejects with a CarrierError when the carrier fails. */
  abstract rate(order: ShipmentOrder): Promise<Quote>;
}
