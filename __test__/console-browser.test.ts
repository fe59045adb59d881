/**
 * The console's page in a real browser: Debian's Chromium (/usr/bin/chromium,
 * or CHROMIUM_PATH) driven by playwright-core, against the real broker. An
 * operator sees 30 parked messages as three groups of 10, opens one, replays
 * it and watches its count fall to 0 while the handler completes each
 * message, then purges another group after confirming its count. The
 * outbox's panel shows its backlog, parked rows and inbox duplicates, and
 * puts a parked row back. An operator fixes a parked message's body in the
 * editor, confirms the diff, and the handler gets the fixed body once; the
 * failure timeline draws each group's bars.
 *
 * Screenshots go to __test__/output/console/; with RR_DOCS=1 (`npm run
 * docs:console`) the ones docs/console.md shows are written to docs/console.png,
 * docs/console-edit.png and docs/console-timeline.png too.
 * Without a Chromium the test is skipped, and says why.
 */
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';

import { type Browser, type Page, chromium } from 'playwright-core';

import { type Message, NonRetryableError, type RabbitRetry, parkedQueueName } from '../lib';
import { type ConsoleServer, startConsole } from '../lib/console';
import { parkPast, parkThreeKinds } from './console-fixture';
import {
  cleanup,
  closeAmqp,
  connectClient,
  createTestDatabase,
  deleteQueues,
  drain,
  dropTestDatabase,
  pgUrl,
  psql,
  queueDepth,
  seedParked,
  sleep,
  testQueue,
  track,
  uniqueName,
  waitFor,
} from './helpers';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OUT = path.join(__dirname, 'output', 'console');
const DOCS_SHOT = path.join(__dirname, '..', 'docs', 'console.png');
const DOCS_EDIT_SHOT = path.join(__dirname, '..', 'docs', 'console-edit.png');
const DOCS_TIMELINE_SHOT = path.join(__dirname, '..', 'docs', 'console-timeline.png');
const hasChromium = existsSync(CHROMIUM);

if (!hasChromium) {
  process.stderr.write(`console-browser.test.ts: skipped, no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)\n`);
}

let browser: Browser | undefined;
let server: ConsoleServer | undefined;
const queues: string[] = [];

afterEach(async () => {
  await browser?.close();
  browser = undefined;
  await server?.close();
  server = undefined;
  await cleanup();
  for (const q of queues.splice(0)) await deleteQueues(q);
});
afterAll(closeAmqp);

/** Saves a screenshot of the page's viewport as `name` in the output folder; returns its path. */
async function shot(page: Page, name: string): Promise<string> {
  mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, name);
  await page.screenshot({ path: file });
  return file;
}

/** Serves the console of `rr` and opens its page in Chromium; the page's script errors are collected in `pageErrors`. */
async function openPage(rr: RabbitRetry): Promise<{ page: Page; pageErrors: string[] }> {
  server = await startConsole({ client: rr, port: 0, management: false });
  browser = await chromium.launch({ executablePath: CHROMIUM });
  const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(server.url);
  return { page, pageErrors };
}

const groupRow = (page: Page, errorName: string) => page.locator('tr.group', { has: page.locator('.ename', { hasText: new RegExp(`^${errorName}$`) }) });

(hasChromium ? test : test.skip)(
  hasChromium
    ? 'an operator sees three groups of 10, opens one, replays it and watches its count fall to 0 as its messages succeed, then purges another after confirming'
    : `the console in a browser (skipped: no Chromium at ${CHROMIUM})`,
  async () => {
    const rr = await connectClient();
    const queue = uniqueName('shipment.requested');
    queues.push(queue);
    const { consumer, succeeded, ids } = await parkThreeKinds(rr, queue, 10);
    track(consumer);
    const { page, pageErrors } = await openPage(rr);

    // Three groups of 10, each named by its error.
    await page.locator('tr.group').nth(2).waitFor();
    expect(await page.locator('tr.group td.count').allTextContents()).toEqual(['10', '10', '10']);
    expect((await page.locator('tr.group .ename').allTextContents()).sort()).toEqual(['Error', 'NonRetryableError', 'TypeError']);
    expect(await page.locator('#scan').textContent()).toMatch(/^Grouped all 30 parked messages in \d+ ms/);
    expect(await page.locator('.queue-item').first().textContent()).toContain('30 parked');
    await shot(page, '1-groups.png');

    // Open the TypeError group: its 10 messages, the first with its body and stack.
    const tax = groupRow(page, 'TypeError');
    await tax.locator('[data-action=open]').click();
    await page.locator('.message').nth(9).waitFor();
    expect(await page.locator('.message').count()).toBe(10);
    const firstMessage = page.locator('.message').first();
    expect(await firstMessage.locator('pre').first().textContent()).toContain('"kind": "tax"');
    expect(await firstMessage.locator('pre').nth(1).textContent()).toMatch(/^TypeError: Cannot read properties of undefined \(reading 'rate'\)\n\s+at /);
    let docsShot = await shot(page, '2-group-open.png');

    // Replay it at 5 a second, after confirming.
    await page.locator('#rate').fill('5');
    await tax.locator('[data-action=replay]').click();
    await page.locator('#modal').waitFor({ state: 'visible' });
    expect(await page.locator('#modal-title').textContent()).toBe('Replay 10 messages?');
    expect(await page.locator('#modal-text').textContent()).toContain(`go back to ${queue} at 5 a second`);
    await page.locator('#modal-ok').click();

    // Its count falls to 0 on the page, without a reload.
    const seen: number[] = [];
    let midShot = false;
    await waitFor(
      async () => {
        const n = Number(await tax.locator('td.count').textContent());
        if (seen[seen.length - 1] !== n) seen.push(n);
        if (!midShot && n > 0 && n < 10) {
          midShot = true;
          // The console guide's picture: the groups, one open and replaying.
          docsShot = await shot(page, '3-replaying.png');
        }
        return n === 0;
      },
      30_000,
      "the TypeError group's count to fall to 0",
      100,
    );
    expect(seen[seen.length - 1]).toBe(0);
    expect(seen.some((n) => n > 0 && n < 10)).toBe(true);
    expect([...seen].sort((a, b) => b - a)).toEqual(seen);

    // The handler completed each replayed message.
    await waitFor(() => succeeded.length === 10, 15_000, 'the replayed messages to succeed');
    expect([...succeeded].sort()).toEqual([...ids.tax].sort());
    await waitFor(
      async () => (await page.locator('tr.group.settled .settled-note').allTextContents()).some((t) => t.startsWith('replayed 10')),
      10_000,
      'the replayed group to settle',
    );
    expect(await queueDepth(parkedQueueName(queue))).toBe(20);
    await shot(page, '4-replayed.png');

    // Purge the NonRetryableError group, after a confirmation that names the count.
    const address = groupRow(page, 'NonRetryableError');
    await address.locator('[data-action=purge]').click();
    await page.locator('#modal').waitFor({ state: 'visible' });
    expect(await page.locator('#modal-title').textContent()).toBe('Purge 10 messages?');
    expect(await page.locator('#modal-ok').textContent()).toBe('Purge 10 messages');
    await shot(page, '5-purge-confirm.png');
    await page.locator('#modal-ok').click();
    await waitFor(async () => (await address.locator('td.count').textContent()) === '0', 15_000, "the purged group's count to be 0");
    await waitFor(async () => (await queueDepth(parkedQueueName(queue))) === 10, 10_000, 'the parked depth to be 10');
    await waitFor(
      async () => (await page.locator('.queue-item').first().textContent())?.includes('10 parked') === true,
      10_000,
      'the queue list to show 10 parked',
    );
    expect(await groupRow(page, 'Error').locator('td.count').textContent()).toBe('10');
    await shot(page, '6-purged.png');

    // What is left is exactly the carrier timeouts; the purged messages never reached the handler.
    const left = (await drain(parkedQueueName(queue))).map((m) => m.properties.messageId);
    expect([...left].sort()).toEqual([...ids.carrier].sort());
    expect(await queueDepth(queue)).toBe(0);
    expect(succeeded).toHaveLength(10);
    expect(pageErrors).toEqual([]);

    if (process.env.RR_DOCS === '1') copyFileSync(docsShot, DOCS_SHOT);
  },
  120_000,
);

(hasChromium ? test : test.skip)(
  hasChromium ? 'markup in a body, a header or an error is shown as text and never runs' : `markup shown as text (skipped: no Chromium at ${CHROMIUM})`,
  async () => {
    const rr = await connectClient();
    const queue = testQueue();
    const markup = '<img src=x onerror="window.__ran=1"><b>bold</b>';
    await seedParked(queue, [{ body: { note: markup }, messageId: 'html-1', errorMessage: `bad ${markup}`, headers: { 'x-note': markup } }]);
    server = await startConsole({ client: rr, port: 0, queues: [queue], management: false });
    browser = await chromium.launch({ executablePath: CHROMIUM });
    const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
    await page.goto(server.url);
    await page.locator('tr.group [data-action=open]').click();
    await page.locator('.message pre').first().waitFor();
    await page.waitForTimeout(300);
    expect(await page.evaluate('typeof window.__ran')).toBe('undefined');
    expect(await page.locator('img, b').count()).toBe(0);
    expect(await page.locator('tr.group .emsg').textContent()).toBe(`bad ${markup.replace('=1', '=<n>')}`);
    expect(await page.locator('.message summary').textContent()).toBe(`Error: bad ${markup}`);
    expect(await page.locator('.message pre').first().textContent()).toContain(JSON.stringify(markup).slice(1, -1));
    expect(await page.locator('.message pre').nth(2).textContent()).toContain('"x-note": "<img src=x onerror=\\"window.__ran=1\\"><b>bold</b>"');
    expect(await queueDepth(parkedQueueName(queue))).toBe(1);
  },
  60_000,
);

(hasChromium ? test : test.skip)(
  hasChromium
    ? "the outbox's panel shows its backlog, its parked rows with their reason (markup as text) and the inbox's duplicates; a parked row is put back after confirming"
    : `the outbox's panel (skipped: no Chromium at ${CHROMIUM})`,
  async () => {
    const db = createTestDatabase('console');
    try {
      const rr = await connectClient({ outbox: { url: pgUrl(db), relay: false } });
      const markup = '<img src=x onerror="window.__ran=1"><b>bold</b>';
      psql(
        `INSERT INTO rabbit_retry_outbox (exchange, routing_key, body, properties, parked_at, park_reason, last_error)
         SELECT '', 'orders', convert_to('m' || i, 'UTF8'), jsonb_build_object('messageId', 'm' || i),
                CASE WHEN i <= 2 THEN now() END, CASE WHEN i <= 2 THEN 'unroutable' END, CASE WHEN i <= 2 THEN '${markup}' END
         FROM generate_series(1, 5) i`,
        db,
      );
      psql("INSERT INTO rabbit_retry_inbox_duplicates (consumer, n) VALUES ('billing', 7)", db);
      const { page, pageErrors } = await openPage(rr);

      const rows = page.locator('#outbox tr[data-outbox-row]');
      await rows.nth(1).waitFor();
      const values = await page.locator('#outbox .tile .value').allTextContents();
      expect([values[0], values[2], values[3]]).toEqual(['3', '2', '0']);
      expect(await page.locator('#outbox .tile').nth(2).textContent()).toContain('unroutable 2');
      expect(await rows.first().locator('.emsg').textContent()).toBe(markup);
      expect(await page.locator('#outbox img, #outbox b').count()).toBe(0);
      expect(await page.locator('#outbox tr[data-consumer=billing] td.num').textContent()).toBe('7');
      await shot(page, '7-outbox.png');

      await rows.first().locator('[data-outbox-action=retry]').click();
      await page.locator('#modal').waitFor({ state: 'visible' });
      expect(await page.locator('#modal-title').textContent()).toBe('Publish 1 parked outbox row?');
      await page.locator('#modal-ok').click();
      await waitFor(async () => (await rows.count()) === 1, 10_000, 'one parked row left on the page');
      expect(psql('SELECT count(*) FROM rabbit_retry_outbox WHERE parked_at IS NULL', db)).toBe('4');
      expect(await page.evaluate('typeof window.__ran')).toBe('undefined');
      expect(pageErrors).toEqual([]);
    } finally {
      await server?.close();
      server = undefined;
      await cleanup();
      dropTestDatabase(db);
    }
  },
  60_000,
);

(hasChromium ? test : test.skip)(
  hasChromium
    ? "an operator fixes a parked message's body in the editor, confirms the diff, and the handler gets the fixed body once; the timeline draws each group's bars"
    : `edit and the timeline in a browser (skipped: no Chromium at ${CHROMIUM})`,
  async () => {
    const rr = await connectClient();
    const queue = uniqueName('order.placed');
    queues.push(queue);
    // Earlier failures, for the timeline: a carrier outage from 40 to 12 minutes ago, and a handler's bug later on.
    await parkPast(queue, [
      ...Array.from({ length: 30 }, (_, i) => ({
        messageId: `past-${i}`,
        errorName: 'Error',
        errorMessage: `carrier timeout after 3000 ms for order ${47_000 + i}`,
        minutesAgo: 40 - Math.floor(i * 0.95),
      })),
      ...Array.from({ length: 8 }, (_, i) => ({
        messageId: `bug-${i}`,
        errorName: 'TypeError',
        errorMessage: "Cannot read properties of undefined (reading 'rate')",
        minutesAgo: 20 - 2 * i,
      })),
    ]);
    // The handler parks an order whose qty is not a number, and records every order it completes.
    const handled: { id?: string; body: string; editedBy: unknown }[] = [];
    const consumer = track(
      await rr.consume({ queue, onFailure: { delays: [] } }, async function placeOrder(msg: Message) {
        const order = msg.json<{ orderId: number; qty: unknown }>();
        if (typeof order.qty !== 'number') throw new NonRetryableError(`order ${order.orderId}: qty must be a number`);
        handled.push({ id: msg.properties.messageId, body: msg.body.toString(), editedBy: msg.headers['retry-edited-by'] });
      }),
    );
    for (const id of [1, 2]) {
      await rr.publish('', queue, { orderId: id, qty: 'two' }, { messageId: `order-${id}`, headers: { tenant: 'us' } });
    }
    await waitFor(() => consumer.stats().parked === 2, 10_000, 'two orders parked');
    const { page, pageErrors } = await openPage(rr);

    // The timeline: each group's bars, their counts adding up to the group's parked messages in the last hour.
    const qty = groupRow(page, 'NonRetryableError');
    await qty.waitFor();
    await page.locator('#timeline rect[data-group]').first().waitFor();
    const barsOf = async (errorName: string) => {
      const key = (await groupRow(page, errorName).getAttribute('data-key')) as string;
      const counts = await page.locator(`#timeline rect[data-group="${key}"]`).evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('data-count'))));
      return { bars: counts.length, messages: counts.reduce((a, b) => a + b, 0) };
    };
    expect(await page.locator('#timeline').getAttribute('data-resolution')).toBe('minute');
    expect((await barsOf('NonRetryableError')).messages).toBe(2);
    expect(await barsOf('Error')).toMatchObject({ messages: 30 });
    expect((await barsOf('Error')).bars).toBeGreaterThan(20);
    expect(await barsOf('TypeError')).toEqual({ bars: 8, messages: 8 });
    expect(await page.locator('#timeline .legend li').count()).toBe(3);
    const timelineShot = await shot(page, '8-timeline.png');
    await page.locator('#timeline [data-resolution=hour]').click();
    await page.locator('#timeline[data-resolution=hour]').waitFor();
    expect((await barsOf('Error')).messages).toBe(30);
    expect((await barsOf('NonRetryableError')).messages).toBe(2);
    await page.locator('#timeline [data-resolution=minute]').click();
    await page.locator('#timeline[data-resolution=minute]').waitFor();

    // Open the parked orders, and edit the first.
    await qty.locator('[data-action=open]').click();
    const card = page.locator('.message', { has: page.locator('.id', { hasText: /^order-1$/ }) });
    await card.waitFor();
    await card.locator('[data-action=edit-message]').click();
    await page.locator('#editor .dialog').waitFor();
    const body = page.locator('#edit-body');
    expect(await body.inputValue()).toBe('{\n  "orderId": 1,\n  "qty": "two"\n}');
    expect(JSON.parse(await page.locator('#edit-headers').inputValue())).toEqual({ tenant: 'us' });

    // A body that is no longer JSON is flagged, and cannot be reviewed.
    await body.fill('{\n  "orderId": 1,\n  "qty": 2,\n}');
    expect(await page.locator('#edit-body-check').textContent()).toMatch(/^Not valid JSON .*The original body is JSON: fix it to send it\.$/);
    expect(await page.locator('#edit-as-text-label').isVisible()).toBe(false);
    expect(await page.locator('#edit-review').isDisabled()).toBe(true);
    await body.fill('{\n  "orderId": 1,\n  "qty": 2\n}');
    expect(await page.locator('#edit-body-check').textContent()).toBe('Valid JSON.');
    await page.locator('#edit-headers').fill('{ "tenant": "eu" }');
    await page.locator('#edit-by').fill('');
    expect(await page.locator('#edit-review').isDisabled()).toBe(true);
    expect(await page.locator('#edit-why').textContent()).toBe('Give your name: the copy records who edited it.');
    await page.locator('#edit-by').fill('ana@example.com');

    // The diff, before anything is sent.
    await page.locator('#edit-review').click();
    await page.locator('#edit-diff').waitFor();
    expect(await page.locator('#edit-title').textContent()).toBe(`Send order-1 back to ${queue}, edited?`);
    expect(await page.locator('#edit-diff span').allTextContents()).toEqual(['  {', '    "orderId": 1,', '-   "qty": "two"', '+   "qty": 2', '  }']);
    expect(await page.locator('#edit-header-changes li').allTextContents()).toEqual(['tenant: "us" → "eu"']);
    const editShot = await shot(page, '9-edit-review.png');
    expect(handled).toEqual([]);
    expect(await queueDepth(parkedQueueName(queue))).toBe(40);

    // Confirmed: the handler gets the fixed body, once; the other order stays parked.
    await page.locator('#edit-send').click();
    await page.locator('#editor').waitFor({ state: 'hidden' });
    expect(await page.locator('#toast').textContent()).toBe(`Edited order-1 (changed: body, header tenant) and sent it to ${queue}`);
    await waitFor(() => handled.length === 1, 10_000, 'the edited order handled');
    await sleep(300);
    expect(handled).toEqual([{ id: 'order-1', body: '{"orderId":1,"qty":2}', editedBy: 'ana@example.com' }]);
    await waitFor(async () => (await qty.locator('td.count').textContent()) === '1', 10_000, "the group's count to fall to 1");
    await waitFor(async () => (await barsOf('NonRetryableError')).messages === 1, 10_000, 'the timeline to count 1 parked order');
    expect(await queueDepth(parkedQueueName(queue))).toBe(39);
    expect(consumer.stats().parked).toBe(2);
    expect(pageErrors).toEqual([]);

    if (process.env.RR_DOCS === '1') {
      copyFileSync(editShot, DOCS_EDIT_SHOT);
      copyFileSync(timelineShot, DOCS_TIMELINE_SHOT);
    }
  },
  120_000,
);
