import { describe, expect, it } from "vitest";
import { ApiError } from "../api";
import { endsSession, expiryOf, refusalMessage } from "./refusal";

const iso = (d: Date) => d.toISOString();

describe("refusalMessage", () => {
  it("says each reason in words", () => {
    expect(refusalMessage(new ApiError(401, "token revoked", "revoked"))).toMatch(/^This token was revoked/);
    expect(refusalMessage(new ApiError(401, "connector token used as a dashboard token", "wrong-kind"))).toBe("This is a connector token; log in with a dashboard token.");
    expect(refusalMessage(new ApiError(401, "malformed token: not valid yet (is a clock wrong?)", "malformed"))).toBe("That is not a usable token: not valid yet (is a clock wrong?).");
    expect(refusalMessage(new ApiError(401, "", "malformed"))).toBe("That is not a usable token; paste the whole token.");
    expect(refusalMessage(new ApiError(401, "x", "bad-signature"))).toMatch(/signed with another key/);
    expect(refusalMessage(new ApiError(401, "x", "unknown"))).toMatch(/no record of this token/);
  });

  it("says when a token expired, from the message or a field", () => {
    const fromMessage = new ApiError(401, "token expired at 2026-01-02T03:04:05Z", "expired");
    expect(iso(expiryOf(fromMessage)!)).toBe("2026-01-02T03:04:05.000Z");
    expect(refusalMessage(fromMessage, iso)).toBe("This token expired on 2026-01-02T03:04:05.000Z. Ask for a new one.");
    const fromField = new ApiError(401, "token expired", "expired", { expiredAt: "2026-03-04T00:00:00+01:00" });
    expect(refusalMessage(fromField, iso)).toBe("This token expired on 2026-03-03T23:00:00.000Z. Ask for a new one.");
    expect(refusalMessage(new ApiError(401, "token expired", "expired"))).toBe("This token expired. Ask for a new one.");
  });

  it("falls back to the gateway's message", () => {
    expect(refusalMessage(new ApiError(401, "invalid token"))).toBe("That token was refused: invalid token");
    expect(refusalMessage(new ApiError(401, ""))).toBe("That token was refused.");
    expect(refusalMessage(new ApiError(0, "network error: Failed to fetch"))).toBe("network error: Failed to fetch");
  });

  it("ends a session with words only when the gateway gave a reason", () => {
    expect(endsSession(new ApiError(401, "token revoked", "revoked"))).toBe(true);
    expect(endsSession(new ApiError(401, "unauthorized"))).toBe(false);
    expect(endsSession(new ApiError(403, "forbidden", "wrong-connector"))).toBe(false);
  });
});
