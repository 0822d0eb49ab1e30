import { isOffline, isUnreachable } from "../api";
import { useMachine } from "../machines/scope";
import { UnknownMachine } from "../machines/UnknownMachine";

/**
 * ErrorBox shows why something could not be loaded. A machine that is
 * offline is not something going wrong: that is said as a note, in the
 * gateway's words (since when), not as an error. On the page of a machine
 * the gateway does not know, that is the error, whatever the request said.
 * A gateway that does not answer is the banner's to say: here, a note.
 */
export function ErrorBox({ error, retry }: { error: Error; retry?: () => void }) {
  const m = useMachine();
  if (m.unknown && m.machine) return <UnknownMachine name={m.machine} known={m.known} />;
  if (isUnreachable(error)) {
    return (
      <p className="offline-banner" role="status" data-testid="not-refreshed">
        Not loaded: {error.message}. It is asked again until it answers.
      </p>
    );
  }
  if (isOffline(error)) {
    return (
      <p className="offline-banner" role="status" data-testid="offline-banner">
        {error.message.replace(/: actions need it online$/, "")}: what it holds shows once it is back online.
        {retry && (
          <button className="link" onClick={retry}>
            Retry
          </button>
        )}
      </p>
    );
  }
  return (
    <div className="error-box" role="alert">
      <strong>Something went wrong:</strong> {error.message}
      {retry && (
        <button className="link" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}
