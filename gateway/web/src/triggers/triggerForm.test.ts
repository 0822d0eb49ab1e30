import { describe, expect, it } from "vitest";
import { EMPTY_FORM, shortDuration, TriggerForm, triggerSpec, triggersFromHash } from "./triggerForm";

const form = (o: Partial<TriggerForm>): TriggerForm => ({ ...EMPTY_FORM, ...o });

describe("triggerSpec", () => {
  const valid: [string, Partial<TriggerForm>, unknown][] = [
    ["a bare webhook", { machine: "laptop", workflow: "review" }, { machine: "laptop", workflow: "review", webhook: true }],
    ["names trimmed", { machine: "  laptop ", workflow: "\treview\n" }, { machine: "laptop", workflow: "review", webhook: true }],
    [
      "a webhook drops what only schedules take",
      { machine: "m", workflow: "w", schedule: "0 2 * * *", timezone: "Europe/Paris", missed: "skip" },
      { machine: "m", workflow: "w", webhook: true },
    ],
    [
      "a webhook with everything",
      { machine: "m", workflow: "w", prompt: "  Review {{.issue.title}}\n", note: " issues ", expire: " 48h " },
      { machine: "m", workflow: "w", webhook: true, prompt: "  Review {{.issue.title}}\n", note: "issues", expire: "48h" },
    ],
    ["a blank prompt and note are none", { machine: "m", workflow: "w", prompt: " \n ", note: "  ", expire: " " }, { machine: "m", workflow: "w", webhook: true }],
    [
      "a schedule in UTC",
      { machine: "m", workflow: "w", kind: "schedule", schedule: " @daily " },
      { machine: "m", workflow: "w", schedule: "@daily", missed: "run-once" },
    ],
    [
      "a schedule with a zone, skipping missed times",
      { machine: "m", workflow: "w", kind: "schedule", schedule: "0 2 * * *", timezone: " Europe/Paris ", missed: "skip", expire: "90m" },
      { machine: "m", workflow: "w", schedule: "0 2 * * *", timezone: "Europe/Paris", missed: "skip", expire: "90m" },
    ],
  ];
  it.each(valid)("builds %s", (_, f, want) => {
    expect(triggerSpec(form(f))).toEqual({ spec: want });
  });

  const invalid: [string, Partial<TriggerForm>, RegExp][] = [
    ["no machine", { workflow: "w" }, /machine/],
    ["a blank machine", { machine: "   ", workflow: "w" }, /machine/],
    ["no workflow", { machine: "m" }, /workflow/],
    ["a blank workflow", { machine: "m", workflow: " \t" }, /workflow/],
    ["a schedule without times", { machine: "m", workflow: "w", kind: "schedule" }, /schedule/],
    ["a blank schedule", { machine: "m", workflow: "w", kind: "schedule", schedule: "  ", timezone: "UTC" }, /cron/],
  ];
  it.each(invalid)("refuses %s, saying what is missing", (_, f, want) => {
    const before = form(f);
    const copy = { ...before };
    const r = triggerSpec(before);
    expect("error" in r && r.error).toMatch(want);
    expect(before).toEqual(copy);
  });
});

describe("shortDuration", () => {
  it.each([
    ["24h0m0s", "24h"],
    ["1h30m0s", "1h30m"],
    ["1h0m30s", "1h0m30s"],
    ["10m0s", "10m"],
    ["10m30s", "10m30s"],
    ["45s", "45s"],
    ["0s", "0s"],
    ["1.5s", "1.5s"],
    ["100h0m0s", "100h"],
    ["2h10m0s", "2h10m"],
  ])("%s reads %s", (go, want) => {
    expect(shortDuration(go)).toBe(want);
  });

  // Go's own format: hours, minutes and seconds, the larger units only when not zero.
  const goFormat = (h: number, m: number, s: number) => (h ? `${h}h${m}m${s}s` : m ? `${m}m${s}s` : `${s}s`);
  const seconds = (d: string) => [...d.matchAll(/(\d+)([hms])/g)].reduce((n, [, v, u]) => n + Number(v) * (u === "h" ? 3600 : u === "m" ? 60 : 1), 0);

  it("keeps the length of any duration and drops only its zero tail", () => {
    for (let i = 0; i < 500; i++) {
      const [h, m, s] = [Math.floor(Math.random() * 3) ? Math.floor(Math.random() * 200) : 0, Math.floor(Math.random() * 60), Math.floor(Math.random() * 60)];
      const go = goFormat(h, m, s);
      const short = shortDuration(go);
      expect(seconds(short), go).toBe(h * 3600 + m * 60 + s);
      expect(go.startsWith(short), go).toBe(true);
      if (short !== "0s") expect(short, go).not.toMatch(/[hm]0[ms]$/);
    }
  });
});

describe("triggersFromHash", () => {
  it("reads the opened trigger, none when absent", () => {
    expect(triggersFromHash("#/triggers?trigger=trg_abc")).toEqual({ open: "trg_abc" });
    expect(triggersFromHash("#/triggers")).toEqual({ open: "" });
    expect(triggersFromHash("#/triggers?other=1")).toEqual({ open: "" });
  });
});
