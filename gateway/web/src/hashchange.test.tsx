// A view reads the address as it first renders and hears of changes only
// once its effects run: an address that moves in between (the page told to
// go elsewhere just as it appears) must still be followed. Each case moves
// the hash during the first render, where no hashchange event can reach a
// listener, and checks the view caught up once mounted.
import { act, cleanup, render } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Route, useHashChange, useRoute } from "./route";

beforeEach(() => window.history.replaceState(null, "", "/#/"));
afterEach(cleanup);

/** mover returns what changes the hash, without an event, the first time it is called. */
function mover(to: string) {
  let moved = false;
  return () => {
    if (moved) return;
    moved = true;
    window.history.replaceState(null, "", to);
  };
}

describe("following the address", () => {
  const cases: [string, Route][] = [
    ["#/m/laptop/threads/01J0", { view: "thread", machine: "laptop", id: "01J0" }],
    ["#/audit", { view: "audit" }],
    ["#/m/ci-box", { view: "threads", machine: "ci-box" }],
    ["#/fleet?by=workflow", { view: "fleet" }],
  ];
  for (const [to, want] of cases) {
    it(`follows a move to ${to} made before the view listened`, () => {
      const move = mover(to);
      let shown: Route | null = null;
      function View() {
        const route = useRoute();
        move();
        shown = route;
        return null;
      }
      act(() => {
        render(<View />);
      });
      expect(shown).toEqual(want);
    });
  }

  it("is not called while the hash stays, and is called when it moves", () => {
    let calls = 0;
    function View() {
      useHashChange(() => calls++);
      return null;
    }
    act(() => {
      render(<View />);
    });
    expect(calls).toBe(0);
    act(() => {
      window.location.hash = "#/audit";
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    });
    expect(calls).toBeGreaterThanOrEqual(1);
  });
});
