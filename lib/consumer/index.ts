/**
 * A running consumer of one work queue ({@link Consumer}), and which
 * consumer's handler the code running now belongs to.
 */
export { Consumer, type ConsumerContext, runningConsumers } from './consumer';
export { alertSettings } from './alerts';
