import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RoleRecord } from "../api";
import { RecordCard } from "./RecordCard";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("RecordCard", () => {
  it("links a step's child thread to the CAS viewer", () => {
    const r = { type: "role", role: "coder", content: "done", contentHash: "ABCDEFGHJKMNP", stateHash: "QRSTVWXYZ0123", childThread: "0123456789ABC", meta: null, timestamp: 0 } as RoleRecord;
    render(<RecordCard m="laptop" r={r} onFork={async () => {}} />);
    const child = screen.getByText("0123456789ABC");
    expect(child.closest(".hashlink")!.textContent).toMatch(/^child thread/);
    expect(child.getAttribute("href")).toBe("#/m/laptop/cas/0123456789ABC");
  });
});
