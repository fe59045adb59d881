/**
 * Topic patterns as RabbitMQ's topic exchange matches them: words split at
 * `.`, `*` one word, `#` none or more.
 */

/** Whether `routingKey` matches the topic pattern `pattern`. @internal */
export function matchesTopic(pattern: string, routingKey: string): boolean {
  const p = pattern.split('.');
  const k = routingKey.split('.');
  // row[j]: the pattern's words so far match the first j words of the key.
  let row: boolean[] = [true, ...k.map(() => false)];
  for (const word of p) {
    const next = row.map(() => false);
    for (let j = 0; j <= k.length; j++) {
      if (word === '#') next[j] = row[j] || (j > 0 && next[j - 1]);
      else next[j] = j > 0 && row[j - 1] && (word === '*' || word === k[j - 1]);
    }
    row = next;
  }
  return row[k.length];
}

/** Whether a pattern is a topic pattern (has a `*` or `#` word). @internal */
export function isTopicPattern(pattern: string): boolean {
  return pattern.split('.').some((w) => w === '*' || w === '#');
}
