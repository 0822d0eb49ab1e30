package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// headersShown is the state (see untilShown) of a table's column headers
// in a window width px wide: "" when the table has rows and every header
// can be seen, else what cannot. The page itself never scrolls sideways (a
// column past the window's edge is one nobody finds). With fit, every
// header is inside the window as the page opens; without, a header may
// lie past its table's right edge only if that table's own box scrolls
// sideways to it, that box ends inside the window, and a cue at its edge
// says more columns follow (a table cut at the edge looks complete).
func headersShown(table string, width int, fit bool) string {
	return fmt.Sprintf(`(() => {
		const t = document.querySelector(%q);
		if (!t || !t.querySelector("tbody tr")) return "no rows in " + %q + " yet";
		if (innerWidth !== %d) return "the window is " + innerWidth + " px wide, not %d";
		const missing = [];
		const page = document.documentElement.scrollWidth;
		if (page > innerWidth + 1) missing.push("the page scrolls sideways: " + page + " px in a " + innerWidth + " px window");
		const box = t.closest(".table-wrap");
		const boxRight = box ? box.getBoundingClientRect().right : innerWidth;
		const scrolls = !!box && box.scrollWidth > box.clientWidth + 1 && ["auto", "scroll"].includes(getComputedStyle(box).overflowX);
		// A table that goes on past its box's edge says so where it is cut.
		const cue = box && box.parentElement.querySelector("[data-testid=scroll-more]");
		const cueShown = !!cue && cue.getBoundingClientRect().width > 0 && cue.getBoundingClientRect().right <= innerWidth + 1;
		if (!%t && scrolls && box.scrollLeft + box.clientWidth < box.scrollWidth - 1 && !cueShown) missing.push("the table goes on past its box's edge and nothing says so");
		for (const th of t.querySelectorAll("thead th")) {
			const r = th.getBoundingClientRect();
			const name = JSON.stringify(th.innerText.trim());
			if (r.width < 8 || r.height < 8) { missing.push(name + " has no room (" + Math.round(r.width) + " px)"); continue; }
			const inWindow = r.left >= -1 && r.right <= innerWidth + 1;
			if (%t) { if (!inWindow) missing.push(name + " is at " + Math.round(r.left) + "-" + Math.round(r.right) + " px, outside the window"); continue; }
			if (inWindow && r.right <= boxRight + 1) continue;
			if (!scrolls) missing.push(name + " is at " + Math.round(r.left) + "-" + Math.round(r.right) + " px, past its table's edge (" + Math.round(boxRight) + " px), which does not scroll");
			else if (boxRight > innerWidth + 1) missing.push("the table's scrolling box ends past the window, at " + Math.round(boxRight) + " px");
		}
		return missing.join("; ");
	})()`, table, table, width, width, fit, fit)
}

// The audit log at 1400 px shows all its columns, "From" included, and the
// thread tables at 820 px (the sidebar still open) show every header or
// scroll sideways inside their own box: never the page, never a clipped
// column.
func TestDashboardTablesAtNarrowWidths(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	g := startGateway(t)
	_, root := g.connector("build-server-in-the-basement", map[string]string{"plan-code-review-with-a-long-name": "linear.esm.js"})
	base := dashboardURL(t, g)
	b := newBrowser(t, exe)
	b.logInToDashboard(base, g.dash)

	// A thread with a long prompt, and audit entries with long targets and sources.
	id := g.startThread("build-server-in-the-basement", "plan-code-review-with-a-long-name",
		"Review the change that moves the storage layer onto the new index format, and check every caller of the old reader for a missed migration")
	if s := finished(t, root, id); s.Result.ReturnCode != 0 {
		t.Fatalf("the thread: %+v", s)
	}

	b.do("a 1400 px window", chromedp.EmulateViewport(1400, 900))
	b.open(base + "/#/audit")
	b.untilShown("every audit column shown at 1400 px", headersShown("table.audit", 1400, true))
	b.shot("audit-1400")

	b.do("an 820 px window", chromedp.EmulateViewport(820, 900))
	b.untilShown("every audit column reachable at 820 px", headersShown("table.audit", 820, false))
	for _, page := range []struct{ name, hash string }{
		{"all-threads-820", "#/threads"},
		{"machine-threads-820", "#/m/build-server-in-the-basement/threads"},
	} {
		b.open(base + "/" + page.hash)
		b.until("the thread "+id+" listed on "+page.hash, fmt.Sprintf(`!!document.querySelector('tr[data-thread=%q]')`, id))
		b.untilShown("every thread column reachable at 820 px on "+page.hash, headersShown("table.threads", 820, false))
		b.shot(page.name)
		// Scrolled to its end, the box shows the last column whole, the thread's column still in view, and no cue.
		eval[bool](b, `(() => { const box = document.querySelector("table.threads").closest(".table-wrap"); box.scrollLeft = box.scrollWidth; return true })()`)
		b.until("the last column whole and the thread column kept in view after scrolling, on "+page.hash, `(() => {
			const ths = [...document.querySelectorAll("table.threads thead th")];
			const box = ths[0].closest(".table-wrap").getBoundingClientRect();
			const last = ths[ths.length - 1].getBoundingClientRect(), first = ths[0].getBoundingClientRect();
			return last.right <= box.right + 1 && last.left >= box.left && first.left >= box.left - 1 && first.left < box.left + 40 &&
				!document.querySelector("[data-testid=scroll-more]");
		})()`)
		b.shot(page.name + "-scrolled")
	}
	b.do("a laptop-sized window", chromedp.EmulateViewport(1280, 900))
	if strings.Contains(eval[string](b, `document.body.innerText`), "Something went wrong") {
		t.Fatalf("an error on the page")
	}
}
