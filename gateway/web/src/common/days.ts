// The filters' days: a yyyy-mm-dd from a date input, in the browser's time
// zone, as the gateway's queries want it.

/** dayStart is the start of a yyyy-mm-dd day in the browser's time zone, days later, as ISO; undefined if it is no date. */
export function dayStart(day: string, days = 0): string | undefined {
  if (!day) return undefined;
  const d = new Date(`${day}T00:00:00`);
  if (Number.isNaN(d.getTime())) return undefined;
  d.setDate(d.getDate() + days);
  return d.toISOString();
}
