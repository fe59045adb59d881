/**
 * The failure timeline: a queue's parked messages counted over time, by
 * error group, from the time each one parked (its `retry-failed-at`, the
 * time of the failure that parked it): per minute over the last hour, and
 * per hour over the last week.
 */

/** How finely a timeline counts: per minute, or per hour. */
export type TimelineResolution = 'minute' | 'hour';

/** Each resolution's bucket, in milliseconds, and how many buckets it shows. */
export const TIMELINE_SPANS: Readonly<Record<TimelineResolution, { readonly bucketMs: number; readonly buckets: number }>> = {
  minute: { bucketMs: 60_000, buckets: 60 },
  hour: { bucketMs: 3_600_000, buckets: 168 },
};

/** One group's counts over a timeline. */
export interface TimelineGroup {
  /** The group's key (its fingerprint's). */
  key: string;
  /** Messages parked in each bucket, oldest bucket first. */
  counts: number[];
  /** Their sum: the group's messages in the timeline. */
  total: number;
}

/** Parked messages counted over time, by group. */
export interface Timeline {
  /** `minute` or `hour`. */
  resolution: TimelineResolution;
  /** A bucket's length, ms. */
  bucketMs: number;
  /** How many buckets: 60 minutes, or 168 hours. */
  buckets: number;
  /** The first bucket's start, ISO 8601 (a whole minute or hour, UTC). */
  from: string;
  /** The last bucket's end, ISO 8601: the bucket holding the reading's time ends there. */
  to: string;
  /** The groups with a message in the timeline, the most messages first (among equals, the first seen first). */
  groups: TimelineGroup[];
  /** Messages that parked before `from`. */
  before: number;
  /** Messages without a time they parked (no readable `retry-failed-at`). */
  undated: number;
}

/** A parked message as the timeline counts it: its group, and when it parked (ms since the epoch; null or NaN when unknown). */
export interface ParkedStamp {
  /** Its group's key. */
  key: string;
  /** When it parked, ms since the epoch. */
  at: number | null;
}

/**
 * Counts `stamps` into the buckets of `resolution` that end with the one
 * holding `now`. A stamp later than the last bucket (a clock ahead of the
 * reader's) counts in the last bucket.
 */
export function timelineOf(stamps: readonly ParkedStamp[], now: number, resolution: TimelineResolution): Timeline {
  const { bucketMs, buckets } = TIMELINE_SPANS[resolution];
  const end = Math.floor(now / bucketMs) * bucketMs + bucketMs;
  const start = end - buckets * bucketMs;
  const groups = new Map<string, TimelineGroup>();
  let before = 0;
  let undated = 0;
  for (const s of stamps) {
    if (s.at === null || !Number.isFinite(s.at)) {
      undated++;
      continue;
    }
    if (s.at < start) {
      before++;
      continue;
    }
    const i = Math.min(buckets - 1, Math.floor((s.at - start) / bucketMs));
    let g = groups.get(s.key);
    if (!g) {
      g = { key: s.key, counts: new Array<number>(buckets).fill(0), total: 0 };
      groups.set(s.key, g);
    }
    g.counts[i]++;
    g.total++;
  }
  const ordered = [...groups.values()];
  // A stable sort keeps the order of first appearance among equal totals.
  ordered.sort((a, b) => b.total - a.total);
  return {
    resolution,
    bucketMs,
    buckets,
    from: new Date(start).toISOString(),
    to: new Date(end).toISOString(),
    groups: ordered,
    before,
    undated,
  };
}

/** A queue's timelines at both resolutions. */
export interface Timelines {
  /** Per minute, the last hour. */
  minute: Timeline;
  /** Per hour, the last week. */
  hour: Timeline;
}

/** `stamps` counted per minute over the last hour and per hour over the last week, both ending at `now`. */
export function timelinesOf(stamps: readonly ParkedStamp[], now: number): Timelines {
  return { minute: timelineOf(stamps, now, 'minute'), hour: timelineOf(stamps, now, 'hour') };
}
