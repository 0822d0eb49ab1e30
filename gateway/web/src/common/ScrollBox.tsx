import { ReactNode, useCallback, useEffect, useRef, useState } from "react";

/**
 * ScrollBox holds a table wider than the page: the table scrolls sideways
 * inside it, never the page, and while columns lie past its right edge a
 * "More columns →" cue says so (a click scrolls to them), so a narrow window
 * shows a table that goes on, not one cut off.
 */
export function ScrollBox({ children }: { children: ReactNode }) {
  const ref = useRef<HTMLDivElement>(null);
  const [more, setMore] = useState(false);
  const measure = useCallback(() => {
    const el = ref.current;
    if (el) setMore(el.scrollLeft + el.clientWidth < el.scrollWidth - 1);
  }, []);
  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    measure();
    window.addEventListener("resize", measure);
    const seen = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(measure);
    seen?.observe(el);
    if (el.firstElementChild) seen?.observe(el.firstElementChild);
    return () => {
      window.removeEventListener("resize", measure);
      seen?.disconnect();
    };
  }, [measure]);
  return (
    <div className={`scroll-box${more ? " more" : ""}`}>
      <div className="table-wrap" ref={ref} onScroll={measure}>
        {children}
      </div>
      {more && (
        <button type="button" className="scroll-more" data-testid="scroll-more" onClick={() => ref.current?.scrollBy({ left: ref.current.clientWidth * 0.8, behavior: "smooth" })}>
          More columns →
        </button>
      )}
    </div>
  );
}
