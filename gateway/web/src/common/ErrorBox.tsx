import { isOffline } from "../api";

/**
 * ErrorBox shows why something could not be loaded. A machine that is
 * offline is not something going wrong: that is said as a note, in the
 * gateway's words (since when), not as an error.
 */
export function ErrorBox({ error, retry }: { error: Error; retry?: () => void }) {
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
