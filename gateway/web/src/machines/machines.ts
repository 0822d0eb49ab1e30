// The machines the dashboard lists: the gateway's live endpoints (who is
// connected now) merged with its memory (every machine it ever saw), so a
// machine that went away stays listed, offline, with when it was last seen.
import { Endpoint, gateway, GatewayMachine, noMemory, Push } from "../api";

/** MachineEntry is one machine in the sidebar. */
export type MachineEntry = {
  name: string;
  status: "online" | "offline";
  /** when it was last heard from (ms): its heartbeat, or the gateway's memory */
  lastSeen?: number;
  version?: string;
  /** when its connection began (ms), for one online now */
  connectedAt?: number;
  /** only in the gateway's memory: not an endpoint now */
  remembered: boolean;
};

const ms = (s: string | undefined) => {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : undefined;
};

/**
 * mergeMachines joins the endpoints and the remembered machines by name,
 * sorted by name. An endpoint's status wins (it is the live view); a
 * machine only remembered is offline; last seen is the later of the two.
 */
export function mergeMachines(eps: Endpoint[], known: GatewayMachine[] | null): MachineEntry[] {
  const out = new Map<string, MachineEntry>();
  for (const ep of eps) {
    out.set(ep.name, { name: ep.name, status: ep.status === "online" ? "online" : "offline", lastSeen: ep.lastHeartbeat || undefined, version: ep.version, connectedAt: ep.connectedAt || undefined, remembered: false });
  }
  for (const m of known ?? []) {
    const seen = ms(m.lastSeen);
    const cur = out.get(m.name);
    if (!cur) {
      out.set(m.name, { name: m.name, status: m.online ? "online" : "offline", lastSeen: seen, remembered: true });
      continue;
    }
    if (seen && cur.status === "offline" && (!cur.lastSeen || seen > cur.lastSeen)) cur.lastSeen = seen;
  }
  return [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** MachineList is the machines and, when the gateway's memory cannot be read, why the list may be short. */
export type MachineList = { machines: MachineEntry[]; degraded?: string };

/**
 * loadMachineList asks for both lists at once. A gateway that keeps no
 * memory (an older one, or one without a store) still lists its endpoints;
 * one whose store does not answer lists what it can and says so (degraded).
 */
export async function loadMachineList(): Promise<MachineList> {
  const [eps, known] = await Promise.all([
    gateway.endpoints(),
    gateway.machines().then(
      (r) => r,
      (e: unknown) => {
        if (noMemory(e)) return null;
        throw e;
      },
    ),
  ]);
  return { machines: mergeMachines(eps, known?.machines ?? null), degraded: known?.degraded || undefined };
}

/**
 * MACHINES_PUSH is the change hint a machine list reloads on: it holds no
 * thread, so only machines coming, going, added or forgotten change it.
 */
export const MACHINES_PUSH: Push = { topic: "machines" };

/** loadAllMachines is loadMachineList's machines, for the views that only pick from them. */
export async function loadAllMachines(): Promise<MachineEntry[]> {
  return (await loadMachineList()).machines;
}
