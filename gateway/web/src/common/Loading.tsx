export function Loading({ what }: { what: string }) {
  return <p className="muted" role="status">Loading {what}…</p>;
}
