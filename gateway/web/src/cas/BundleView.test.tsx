import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { href, parseHash } from "../route";
import { json, stubFetch } from "../testutil/fetch";
import { BundleView } from "./BundleView";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("BundleView", () => {
  it("has its own route", () => {
    expect(href.bundle("lap top", "ABCDEFGHJKMNP")).toBe("#/m/lap%20top/bundles/ABCDEFGHJKMNP");
    expect(parseHash(href.bundle("lap top", "ABCDEFGHJKMNP"))).toEqual({ view: "bundle", machine: "lap top", hash: "ABCDEFGHJKMNP" });
    expect(parseHash("#/m/a/bundles").view).toBe("notfound");
  });

  it("shows a bundle's source, roles and workflows", async () => {
    stubFetch([["/api/clients/laptop/bundles/ABCDEFGHJKMNP", () => json(200, {
      hash: "ABCDEFGHJKMNP", kind: "js", source: "export const run = 1;", truncated: false, size: 21,
      workflows: [{ name: "crawl", current: true }, { name: "old", current: false }],
      descriptor: { description: "Crawls.", roles: { fetch: { description: "the fetch step" } }, graph: { edges: [] } },
    })]]);
    render(<BundleView machine="laptop" hash="ABCDEFGHJKMNP" />);
    expect((await screen.findByTestId("bundle-source")).textContent).toBe("export const run = 1;");
    const wfs = screen.getByTestId("bundle-workflows");
    expect([...wfs.querySelectorAll("a")].map((a) => a.getAttribute("href"))).toEqual(["#/m/laptop/workflows/crawl", "#/m/laptop/workflows/old?version=ABCDEFGHJKMNP"]);
    expect(wfs.textContent).toContain("old (an older version)");
    expect(screen.getByTestId("bundle-roles").textContent).toContain("the fetch step");
  });

  it("says which values of a YAML workflow are hidden, and why a source is withheld", async () => {
    stubFetch([["/api/clients/laptop/bundles/YAMLHASH00000", () => json(200, {
      hash: "YAMLHASH00000", kind: "yaml", source: "env:\n  KEY: (hidden)\n", truncated: false, size: 30, workflows: [], descriptor: null,
      hidden: ["agents.a.env.KEY", "agents.a.args[0]"],
    })]]);
    render(<BundleView machine="laptop" hash="YAMLHASH00000" />);
    const note = await screen.findByTestId("bundle-hidden");
    expect(note.textContent).toContain("2 values are hidden");
    expect(note.getAttribute("title")).toBe("agents.a.env.KEY\nagents.a.args[0]");
    expect(screen.getByTestId("bundle-source").textContent).toContain("KEY: (hidden)");
    cleanup();

    stubFetch([["/api/clients/laptop/bundles/BROKEN0000000", () => json(200, {
      hash: "BROKEN0000000", kind: "yaml", source: "", truncated: false, size: 12, workflows: [], descriptor: null,
      withheld: "the stored workflow does not parse",
    })]]);
    render(<BundleView machine="laptop" hash="BROKEN0000000" />);
    expect((await screen.findByTestId("bundle-withheld")).textContent).toContain("does not parse");
    expect(screen.queryByTestId("bundle-source")).toBeNull();
    expect(screen.queryByTestId("bundle-hidden")).toBeNull();
  });

  it("says when the machine has no such bundle", async () => {
    stubFetch([["/api/clients/laptop/bundles/", () => json(404, { error: "bundle not found: 0000000000000" })]]);
    render(<BundleView machine="laptop" hash="0000000000000" />);
    expect((await screen.findByRole("alert")).textContent).toContain("bundle not found");
  });
});
