import { FormEvent, useEffect, useState } from "react";
import { ApiError, gateway, getToken, onUnauthorized, takeTokenFromLink, useApi } from "./api";
import { AuditView } from "./audit/AuditView";
import { BundleView } from "./cas/BundleView";
import { CasView } from "./cas/CasView";
import { FleetGlance } from "./fleet/FleetGlance";
import { GatewayBanner } from "./common/GatewayBanner";
import { InboxLink } from "./inbox/InboxLink";
import { InboxView } from "./inbox/InboxView";
import { DeliveriesView } from "./notifications/DeliveriesView";
import { TriggersView } from "./triggers/TriggersView";
import { endsSession, refusalMessage } from "./common/refusal";
import { loadMachineList, MACHINES_PUSH } from "./machines/machines";
import { MachineScope } from "./machines/scope";
import { SidebarView } from "./machines/Sidebar";
import { Route, href, useHashChange, useRoute } from "./route";
import { AllThreads } from "./threads/FleetThreads";
import { ThreadDetail } from "./threads/ThreadDetail";
import { ThreadList } from "./threads/ThreadList";
import { WorkflowDetailView } from "./workflows/WorkflowDetailView";
import { WorkflowList } from "./workflows/WorkflowList";

type Auth = "checking" | "in" | "out";

export function App() {
  const [auth, setAuth] = useState<Auth>(() => (getToken() ? "checking" : "out"));
  // Why the last session ended (a token revoked or expired meanwhile), for the login page.
  const [why, setWhy] = useState<string | null>(null);
  useEffect(
    () =>
      onUnauthorized((e) => {
        if (endsSession(e)) setWhy(refusalMessage(e));
        setAuth("out");
      }),
    [],
  );
  // A login link opened in a tab that already shows the dashboard changes
  // only the hash, without a reload: take its token then too.
  useHashChange(() => {
    if (!takeTokenFromLink()) return;
    setWhy(null);
    setAuth("checking");
  });
  useEffect(() => {
    // A stored token: log in again so the stream cookie is fresh too.
    const t = getToken();
    if (auth !== "checking" || !t) return;
    gateway.login(t).then(
      () => setAuth("in"),
      (e) => {
        // Say why a stored or linked token no longer works.
        if (e instanceof ApiError && (e.status === 401 || e.status === 403)) setWhy(refusalMessage(e));
        setAuth("out");
      },
    );
  }, [auth]);
  if (auth === "checking") return <div className="center muted" role="status">Checking your token…</div>;
  if (auth === "out") return <Login why={why} onIn={() => { setWhy(null); setAuth("in"); }} />;
  return <Shell onOut={() => { setWhy(null); setAuth("out"); }} />;
}

/** Login asks for a dashboard token; why is the reason the last session ended, if it was cut off. */
export function Login({ onIn, why = null }: { onIn: () => void; why?: string | null }) {
  const [token, setTok] = useState("");
  const [error, setError] = useState<string | null>(why);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await gateway.login(token.trim());
      onIn();
    } catch (err) {
      setError(err instanceof ApiError ? refusalMessage(err) : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="center">
      <form className="card login" onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">uncaged workflow</h1>
        <label htmlFor="token">Dashboard token</label>
        <textarea id="token" name="token" rows={3} value={token} onChange={(e) => setTok(e.target.value)} placeholder="paste the token from `uncaged-gateway token create --dashboard`" autoFocus required />
        {error && <p className="error" role="alert">{error}</p>}
        <button type="submit" className="primary" disabled={busy || !token.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}

function Shell({ onOut }: { onOut: () => void }) {
  const route = useRoute();
  const [menu, setMenu] = useState(false);
  const machineName = "machine" in route ? route.machine : null;
  // One machine list for the sidebar and for the pages that ask whether their machine is known.
  const machines = useApi(loadMachineList, [], 5000, MACHINES_PUSH);
  useEffect(() => setMenu(false), [route]);
  // Who is online, as the machine list last said: the inbox count is asked again when it changes.
  const fleet = (machines.data?.machines ?? []).map((m) => `${m.name}:${m.status}`).join(",");
  const logout = async () => {
    try {
      await gateway.logout();
    } catch {
      /* the token is dropped anyway */
    }
    onOut();
  };
  return (
    <div className="shell">
      <header className="topbar">
        <button className="menu-btn" aria-expanded={menu} aria-controls="sidebar" onClick={() => setMenu((m) => !m)}>
          ☰<span className="sr-only"> machines</span>
        </button>
        <a className="brand" href={href.home()}>uncaged workflow</a>
        <a className="all-link" href={href.all()} aria-current={route.view === "all" || route.view === "home" ? "page" : undefined}>All machines</a>
        <a className="all-link fleet-link" href={href.fleet()} aria-current={route.view === "fleet" ? "page" : undefined}>Fleet</a>
        <InboxLink current={route.view === "inbox"} fleet={fleet} />
        <a className="all-link triggers-link" href={href.triggers()} aria-current={route.view === "triggers" ? "page" : undefined}>Triggers</a>
        <a className="all-link audit-link" href={href.audit()} aria-current={route.view === "audit" || route.view === "notifications" ? "page" : undefined}>Audit</a>
        {machineName && (
          <nav className="tabs" aria-label="machine sections">
            <span className="crumb">{machineName}</span>
            <a href={href.threads(machineName)} aria-current={route.view === "threads" || route.view === "thread" ? "page" : undefined}>Threads</a>
            <a href={href.workflows(machineName)} aria-current={route.view === "workflows" || route.view === "workflow" ? "page" : undefined}>Workflows</a>
          </nav>
        )}
        <button className="link" onClick={logout}>Log out</button>
      </header>
      <SidebarView current={machineName} open={menu} list={machines} />
      <main className="content">
        <GatewayBanner />
        <MachineScope machine={machineName} list={machines}>
          <Page route={route} />
        </MachineScope>
      </main>
    </div>
  );
}

function Page({ route }: { route: Route }) {
  switch (route.view) {
    case "home":
    case "all":
      return <AllThreads />;
    case "threads":
      return <ThreadList key={route.machine} machine={route.machine} />;
    case "thread":
      return <ThreadDetail key={`${route.machine}/${route.id}`} machine={route.machine} id={route.id} />;
    case "audit":
      return <AuditView />;
    case "notifications":
      return <DeliveriesView />;
    case "inbox":
      return <InboxView />;
    case "triggers":
      return <TriggersView />;
    case "fleet":
      return <FleetGlance />;
    case "workflows":
      return <WorkflowList key={route.machine} machine={route.machine} />;
    case "workflow":
      return <WorkflowDetailView key={`${route.machine}/${route.name}`} machine={route.machine} name={route.name} />;
    case "cas":
      return <CasView key={`${route.machine}/${route.hash}`} machine={route.machine} hash={route.hash} />;
    case "bundle":
      return <BundleView key={`${route.machine}/${route.hash}`} machine={route.machine} hash={route.hash} />;
    case "notfound":
      return (
        <section className="empty">
          <h1>Not found</h1>
          <p>
            Nothing lives at <code>{route.path}</code>. <a href={href.home()}>Back to the start</a>.
          </p>
        </section>
      );
  }
}
