import { href } from "../route";

/**
 * UnknownMachine says that the gateway knows no machine by the name a page
 * was opened for (a typo, or a link from another gateway), and where the
 * known ones are.
 */
export function UnknownMachine({ name, known }: { name: string; known: string[] }) {
  return (
    <div className="error-box" role="alert" data-testid="unknown-machine">
      <strong>Unknown machine:</strong> the gateway knows no machine named <code>{name}</code> (none is connected under that name, and it remembers none).{" "}
      {known.length > 0 ? (
        <>
          Known machines:{" "}
          {known.map((k, i) => (
            <span key={k}>
              {i > 0 && ", "}
              <a href={href.threads(k)}>{k}</a>
            </span>
          ))}
          .{" "}
        </>
      ) : (
        <>No machine is known yet: start <code>uncaged-workflow connect</code> on one. </>
      )}
      See <a href={href.all()}>all machines</a> or <a href={href.fleet()}>the fleet</a>.
    </div>
  );
}
