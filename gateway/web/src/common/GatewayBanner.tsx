import { useEffect, useState } from "react";
import { ago, fmtTime } from "../api";
import { check, useReach } from "../reach";

/**
 * GatewayBanner says, on every page, that the gateway does not answer:
 * since when it last did, that it is being asked again, and what that
 * means for the page (nothing refreshes, machines' presence is unknown,
 * actions are off). It goes away by itself once the gateway answers.
 */
export function GatewayBanner() {
  const reach = useReach();
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (reach.reachable) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [reach.reachable]);
  if (reach.reachable) return null;
  const last = reach.lastContact;
  return (
    <div className="gateway-down" role="alert" data-testid="gateway-unreachable">
      <strong>Gateway unreachable — retrying.</strong>{" "}
      {last ? (
        <>
          Last contact <time dateTime={new Date(last).toISOString()}>{fmtTime(last)}</time> ({ago(last, Math.max(now, last))}).{" "}
        </>
      ) : (
        <>No answer since this page opened. </>
      )}
      Until it answers, what you see is not refreshed, machines' presence is unknown, and actions are off.{" "}
      <button type="button" className="link" onClick={check}>Retry now</button>
    </div>
  );
}
