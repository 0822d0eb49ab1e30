// Why the gateway refused a token, in words for the login page. The
// gateway answers a refusal with {"error": "<message>", "reason": "<word>"};
// the words here are for the reasons a person can act on, and any other
// refusal shows the gateway's own message (which never holds the token).
import { ApiError } from "../api";

// An RFC 3339 time in the gateway's message, e.g. "token expired at 2026-01-02T03:04:05Z".
const TIME_RE = /\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?/;

/** expiryOf finds when a token expired: a field of the refusal, else a time in its message. */
export function expiryOf(e: ApiError): Date | null {
  for (const k of ["expiredAt", "expiresAt", "expiry", "at"]) {
    const v = e.body?.[k];
    if (typeof v === "string" || typeof v === "number") {
      const d = new Date(v);
      if (!Number.isNaN(d.getTime())) return d;
    }
  }
  const m = TIME_RE.exec(e.message);
  if (!m) return null;
  const d = new Date(m[0].replace(" ", "T"));
  return Number.isNaN(d.getTime()) ? null : d;
}

/**
 * refusalMessage says why a token was refused. fmt formats the expiry
 * (the browser's locale by default; tests pass a fixed one).
 */
export function refusalMessage(e: ApiError, fmt: (d: Date) => string = (d) => d.toLocaleString()): string {
  switch (e.reason) {
    case "revoked":
      return "This token was revoked. Ask for a new one (uncaged-gateway token create --dashboard).";
    case "expired": {
      const d = expiryOf(e);
      return d ? `This token expired on ${fmt(d)}. Ask for a new one.` : "This token expired. Ask for a new one.";
    }
    case "wrong-kind":
      return "This is a connector token; log in with a dashboard token.";
    case "wrong-connector":
      return "This token belongs to another connector; log in with a dashboard token.";
    case "malformed": {
      // The gateway's message says what is wrong with it ("not valid yet (is a clock wrong?)").
      const what = e.message.replace(/^malformed token:?\s*/i, "").replace(/\.$/, "");
      return what ? `That is not a usable token: ${what}.` : "That is not a usable token; paste the whole token.";
    }
    case "missing":
      return "Log in with a dashboard token.";
    case "bad-signature":
      return "This token was signed with another key: it is from another gateway, or the gateway's key was changed since.";
    case "unknown":
      return "This gateway has no record of this token.";
  }
  if (e.status === 401 || e.status === 403) return e.message && e.message !== "Unauthorized" ? `That token was refused: ${e.message}` : "That token was refused.";
  return e.message;
}

/** endsSession tells whether a 401 met while logged in should say why on the login page. */
export const endsSession = (e: ApiError) => e.status === 401 && !!e.reason;
