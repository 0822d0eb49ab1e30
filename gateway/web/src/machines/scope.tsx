// What every page may do, in one place: an action needs the gateway to
// answer and, on a machine's pages, the gateway to know that machine. The
// buttons that act (ActionButton, ConfirmButton, Run…) ask useActionBlock,
// so none of them stays enabled where it cannot work.
import { createContext, ReactNode, useContext } from "react";
import { Loadable } from "../api";
import { UNREACHABLE_REASON, useReach } from "../reach";
import { MachineList } from "./machines";

/** Scope is the machine whose page this is (null elsewhere) and the machines the gateway knows, as last loaded. */
export type Scope = { machine: string | null; list: Loadable<MachineList> | null };

const ScopeContext = createContext<Scope>({ machine: null, list: null });

/** MachineScope gives the pages under it their machine and the machine list (the sidebar's, loaded once). */
export function MachineScope({ machine, list, children }: Scope & { children: ReactNode }) {
  return <ScopeContext.Provider value={{ machine, list }}>{children}</ScopeContext.Provider>;
}

/**
 * isUnknown tells whether the gateway does not know a machine: the list of
 * every machine it knows (connected or remembered) is loaded, complete (its
 * store answered), and the name is not in it. Anything less is no proof.
 */
export function isUnknown(name: string, list: MachineList | undefined): boolean {
  if (!list || list.degraded) return false;
  return !list.machines.some((m) => m.name === name);
}

/** useMachine says whether the page's machine is unknown, with the machines the gateway does know. */
export function useMachine(): { machine: string | null; unknown: boolean; known: string[] } {
  const { machine, list } = useContext(ScopeContext);
  const data = list?.data;
  return { machine, unknown: machine !== null && isUnknown(machine, data), known: (data?.machines ?? []).map((m) => m.name) };
}

/** unknownReason is why actions are off on the page of a machine the gateway does not know. */
export const unknownReason = (machine: string) => `the gateway knows no machine named ${machine}`;

/**
 * useActionBlock is why an action cannot be taken here now (the gateway does
 * not answer, or the page's machine is unknown to it), or null when it can.
 */
export function useActionBlock(): string | null {
  const reach = useReach();
  const m = useMachine();
  if (!reach.reachable) return UNREACHABLE_REASON;
  if (m.unknown && m.machine) return unknownReason(m.machine);
  return null;
}
