/**
 * The `tx` a handler of an inbox group gets: the group's client, seen
 * through a guard. The deliveries of a group share one transaction, so a
 * statement that ends it (or opens another) would commit or drop the work of
 * other messages; the guard reads each statement's text before it is sent
 * and refuses those, with an {@link InboxError}, without sending anything.
 * It also refuses `release()` (the group's client is the group's) and any
 * query after the handler's turn ended, and it tells the group whether the
 * handler sent a statement and whether one of them failed in the database.
 */
import { InboxError } from '../errors';
import type { PgClientLike } from '../sql/transaction';
import { sqlStateOf } from './outcome';

/** What a handler's `tx` saw of it. */
export interface TxUse {
  /** Statements it sent (and the guard let through). */
  sent: number;
  /** A statement it sent failed in the database (the transaction is aborted from then on). */
  failed: boolean;
  /** What the first failed statement was answered with. */
  failure?: unknown;
  /** A statement it sent found the transaction aborted already (SQLSTATE 25P02), before one of its own failed: it broke before its turn. */
  abortedBefore: boolean;
  /** What the guard refused, the first time. */
  refused?: InboxError;
}

/** A handler's guarded `tx`, and how to end its turn. */
export interface GuardedTx {
  tx: PgClientLike;
  use: TxUse;
  /** The handler's turn is over: `tx` refuses every query from now on. */
  end: () => void;
}

/** Statements that end a transaction, or open another, by their first word. */
const ENDING = new Set(['COMMIT', 'END', 'ROLLBACK', 'ABORT', 'BEGIN', 'START']);

/**
 * The first words (up to three, upper-cased) of each statement of `sql`,
 * reading PostgreSQL's quoting as it is with `standard_conforming_strings`
 * on: string literals (`'…'`, `E'…'` with backslash escapes), quoted
 * identifiers, dollar quoting (`$tag$…$tag$`), and both kinds of comment
 * (`--`, and `/* … *\/`, which nest). Whatever is quoted or commented is
 * skipped, so a `;` or a keyword in it is not read as a statement.
 */
export function statementHeads(sql: string): string[][] {
  const heads: string[][] = [];
  let words: string[] = [];
  let wordsOpen = true;
  const n = sql.length;
  let i = 0;
  const isIdent = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);
  const word = (w: string) => {
    if (wordsOpen && words.length < 3) words.push(w.toUpperCase());
  };
  const other = () => {
    wordsOpen = false;
  };
  while (i < n) {
    const c = sql[i];
    const next = sql[i + 1];
    if (c === ';') {
      if (words.length > 0) heads.push(words);
      words = [];
      wordsOpen = true;
      i++;
    } else if (c === '-' && next === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? n : end + 1;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') {
          depth++;
          i += 2;
        } else if (sql[i] === '*' && sql[i + 1] === '/') {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "'") {
      other();
      const escapes = (sql[i - 1] === 'E' || sql[i - 1] === 'e') && !isIdent(sql[i - 2]);
      i++;
      while (i < n) {
        if (escapes && sql[i] === '\\') i += 2;
        else if (sql[i] === "'" && sql[i + 1] === "'") i += 2;
        else if (sql[i] === "'") break;
        else i++;
      }
      i++;
    } else if (c === '"') {
      other();
      i++;
      while (i < n) {
        if (sql[i] === '"' && sql[i + 1] === '"') i += 2;
        else if (sql[i] === '"') break;
        else i++;
      }
      i++;
    } else if (c === '$' && !isIdent(sql[i - 1])) {
      const tag = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(sql.slice(i, i + 64));
      other();
      if (!tag) {
        i++; // a parameter ($1)
        continue;
      }
      const end = sql.indexOf(tag[0], i + tag[0].length);
      i = end < 0 ? n : end + tag[0].length;
    } else if (/[A-Za-z_\u0080-\uffff]/.test(c)) {
      let j = i + 1;
      while (j < n && isIdent(sql[j])) j++;
      // E'…' is a string, read by the branch above.
      if (sql[j] === "'" && j === i + 1 && (c === 'E' || c === 'e')) {
        i = j;
        continue;
      }
      word(sql.slice(i, j));
      i = j;
    } else if (/\s/.test(c)) {
      i++;
    } else {
      other();
      i++;
    }
  }
  if (words.length > 0) heads.push(words);
  return heads;
}

/** Why `head` (a statement's first words) may not run in a group's transaction, or undefined when it may. */
function endingOf(head: string[]): string | undefined {
  const [first, second, third] = head;
  if (!ENDING.has(first)) return first === 'PREPARE' && second === 'TRANSACTION' ? 'PREPARE TRANSACTION' : undefined;
  // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name: back to a savepoint of the handler's own, inside the transaction.
  if (first === 'ROLLBACK' && (second === 'TO' || ((second === 'WORK' || second === 'TRANSACTION') && third === 'TO'))) return undefined;
  if (first === 'START' && second !== 'TRANSACTION') return undefined;
  return first === 'START' ? 'START TRANSACTION' : first;
}

/** What {@link endingIn} found for the texts read lately: a handler sends the same few texts again and again. */
const readLately = new Map<string, string | undefined>();
const READ_LATELY_MAX = 512;

/** The first statement of `sql` that may not run in a group's transaction (as {@link endingOf} names it), or undefined. */
export function endingIn(sql: string): string | undefined {
  if (readLately.has(sql)) return readLately.get(sql);
  let ending: string | undefined;
  for (const head of statementHeads(sql)) {
    ending = endingOf(head);
    if (ending !== undefined) break;
  }
  if (sql.length <= 4096) {
    if (readLately.size >= READ_LATELY_MAX) readLately.clear();
    readLately.set(sql, ending);
  }
  return ending;
}

/** The text of what node-postgres's `query` was given, or undefined when it has none the guard can read. */
function textOf(q: unknown): string | undefined | null {
  if (typeof q === 'string') return q;
  if (typeof q !== 'object' || q === null) return undefined;
  const o = q as { text?: unknown; name?: unknown; cursor?: { text?: unknown } };
  if (typeof o.text === 'string') return o.text;
  if (typeof o.cursor?.text === 'string') return o.cursor.text;
  // A named statement without its text runs what was prepared under the name, which the guard read then.
  if (typeof o.name === 'string' && o.text === undefined) return null;
  return undefined;
}

/** Whether `q` is a submittable (a cursor, a stream): its outcome comes as events, not as a promise. */
function isSubmittable(q: unknown): boolean {
  return typeof q === 'object' && q !== null && typeof (q as { submit?: unknown }).submit === 'function';
}

/**
 * Guards `client` for the handler of `consumer`'s message whose turn it is.
 * A query it refuses rejects (or calls its callback) with an
 * {@link InboxError}, and is never sent.
 */
export function guardTx(client: PgClientLike, consumer: string): GuardedTx {
  const use: TxUse = { sent: 0, failed: false, abortedBefore: false };
  let ended = false;
  const failedWith = (err: unknown) => {
    if (use.failed) return;
    if (sqlStateOf(err) === '25P02') use.abortedBefore = true;
    else {
      use.failure = err;
      use.failed = true;
    }
  };
  const refuse = (why: string, args: unknown[]) => {
    const err = new InboxError(`inbox '${consumer}': ${why}`);
    use.refused ??= err;
    const cb = args[args.length - 1];
    if (typeof cb === 'function') {
      process.nextTick(cb, err);
      return undefined;
    }
    if (isSubmittable(args[0])) throw err;
    return Promise.reject(err);
  };
  const query = (...args: unknown[]): unknown => {
    if (ended) return refuse("tx was used after the handler's turn in its group ended; the statement was not sent", args);
    const text = textOf(args[0]);
    if (text === undefined) {
      return refuse(
        "tx of an inbox group reads each statement before it is sent, and this query has no text it can read (give node-postgres the statement's text); the statement was not sent",
        args,
      );
    }
    const ending = text === null ? undefined : endingIn(text);
    if (ending !== undefined) {
      return refuse(
        `the handler's tx refused ${ending}: the deliveries of an inbox group share one transaction, which the inbox ends; the statement was not sent`,
        args,
      );
    }
    use.sent++;
    const cb = args[args.length - 1];
    if (typeof cb === 'function') {
      const watched = [...args];
      watched[watched.length - 1] = (err: unknown, ...rest: unknown[]) => {
        if (err && sqlStateOf(err)) failedWith(err);
        return (cb as (...a: unknown[]) => unknown)(err, ...rest);
      };
      return (client.query as (...a: unknown[]) => unknown)(...watched);
    }
    const r = (client.query as (...a: unknown[]) => unknown)(...args);
    // A submittable (a cursor, a stream) answers with events, not a promise: only the group's check will know how it ended.
    if (r && typeof (r as PromiseLike<unknown>).then === 'function') {
      (r as PromiseLike<unknown>).then(undefined, (err: unknown) => {
        if (sqlStateOf(err)) failedWith(err);
      });
    }
    return r;
  };
  const release = () => {
    throw new InboxError(`inbox '${consumer}': tx of an inbox group is the group's client: the inbox releases it, not the handler`);
  };
  const tx = new Proxy(client, {
    get(target, prop) {
      if (prop === 'query') return query;
      if (prop === 'release') return release;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    tx,
    use,
    end: () => {
      ended = true;
    },
  };
}
