export function Status({ s }: { s: string }) {
  return <span className={`badge st-${s}`}>{s}</span>;
}
