/**
 * Reading whatever a handler, a callback or a dependency threw as text,
 * safely: a getter, a proxy trap, a `toJSON` or a `toString` that throws
 * spoils only the part it guards, and none of these functions throws. Every
 * part of rabbit-retry that writes a thrown value into a log line, an error
 * message or a header reads it here.
 */

/** What a thrown value is, in words, for a reason: never throws. */
export function reasonOf(e: unknown): string {
  try {
    if (typeof e === 'string') return e;
    if (e !== null && (typeof e === 'object' || typeof e === 'function')) {
      const m = (e as { message?: unknown }).message;
      if (typeof m === 'string' && m.length > 0) return m;
    }
    return textOf(e);
  } catch {
    return 'a value that cannot be read';
  }
}

/** A readable text of any value: never throws. */
function textOf(v: unknown): string {
  try {
    switch (typeof v) {
      case 'string':
        return v;
      case 'number':
      case 'boolean':
      case 'bigint':
      case 'undefined':
        return String(v);
      case 'symbol':
        return v.toString();
      case 'function': {
        const name = (v as { name?: unknown }).name;
        return typeof name === 'string' && name.length > 0 ? `a function ${name}` : 'a function';
      }
    }
    if (v === null) return 'null';
  } catch {
    return 'a value that cannot be read';
  }
  try {
    const json = JSON.stringify(v);
    if (typeof json === 'string') return json;
  } catch {
    // Not JSON: a cycle, a BigInt, a throwing toJSON or getter; try String().
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- the last resort: the object's own toString, else its tag
    return String(v);
  } catch (e) {
    return `an object that can be neither read as JSON nor turned into a string (${reasonOf(e)})`;
  }
}

type Read = { ok: true; value: unknown } | { ok: false; why: string };

/** Reads one property; a getter or proxy trap that throws gives its reason. */
function readProp(obj: object, key: string): Read {
  try {
    return { ok: true, value: (obj as Record<string, unknown>)[key] };
  } catch (e) {
    return { ok: false, why: reasonOf(e) };
  }
}

/** The class name of an object, when it can be read. */
function constructorName(obj: object): string | undefined {
  const c = readProp(obj, 'constructor');
  if (!c.ok || c.value === null || (typeof c.value !== 'function' && typeof c.value !== 'object')) return undefined;
  const n = readProp(c.value, 'name');
  return n.ok && typeof n.value === 'string' && n.value.length > 0 && n.value !== 'Object' ? n.value : undefined;
}

/**
 * The name, message and stack of whatever a handler threw, as strings. Each
 * is read on its own, so a getter or a proxy that throws spoils only its own
 * part, which then says why it could not be read. Without `withStack`, the
 * stack is not read (it is `''`). Never throws.
 */
export function errorInfo(err: unknown, withStack = true): { name: string; message: string; stack: string } {
  try {
    if (err === undefined || err === null) {
      return {
        name: 'Error',
        message: `the handler threw ${String(err)}; throw an Error to keep a message and a stack`,
        stack: '',
      };
    }
    if (typeof err !== 'object' && typeof err !== 'function') return { name: 'Error', message: textOf(err), stack: '' };
    let isError = false;
    try {
      isError = err instanceof Error;
    } catch {
      // A proxy whose getPrototypeOf trap throws: read it as an object.
    }
    if (isError) {
      // The usual case, read at once: an Error whose name, message (and stack) are strings.
      try {
        const e = err as Error;
        const name = e.name;
        const message = e.message;
        const stack = withStack ? e.stack : '';
        if (typeof name === 'string' && name.length > 0 && typeof message === 'string' && typeof stack === 'string') return { name, message, stack };
      } catch {
        // A getter or a proxy that throws: each part is read on its own below.
      }
    }
    const name = readProp(err, 'name');
    const message = readProp(err, 'message');
    // V8 formats a stack when it is first read, which costs more than the rest.
    const stack: Read = withStack ? readProp(err, 'stack') : { ok: true, value: undefined };
    let nameText: string;
    if (name.ok && typeof name.value === 'string' && name.value.length > 0) nameText = name.value;
    else if (name.ok && name.value !== undefined && name.value !== null && name.value !== '') nameText = textOf(name.value);
    else nameText = (isError ? constructorName(err) : undefined) ?? 'Error';
    let messageText: string;
    if (!message.ok) messageText = `the error's message could not be read: ${message.why}`;
    else if (typeof message.value === 'string') messageText = message.value;
    else if (message.value !== undefined && message.value !== null) messageText = textOf(message.value);
    else if (isError) messageText = `the handler threw an error (${nameText}) whose message is ${String(message.value)}`;
    else messageText = `the handler threw a non-Error ${typeof err === 'function' ? 'function' : 'object'}: ${textOf(err)}`;
    let stackText: string;
    if (!stack.ok) stackText = `the error's stack could not be read: ${stack.why}`;
    else if (typeof stack.value === 'string') stackText = stack.value;
    else if (stack.value === undefined || stack.value === null) stackText = '';
    else stackText = textOf(stack.value);
    if (!name.ok && !stackText) stackText = `the error's name could not be read: ${name.why}`;
    return { name: nameText, message: messageText, stack: stackText };
  } catch (e) {
    return { name: 'Error', message: `the handler's error could not be read: ${reasonOf(e)}`, stack: '' };
  }
}
