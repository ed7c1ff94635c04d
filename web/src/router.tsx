import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";

/** Navigates within the app (history API), as a link click does. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.dispatchEvent(new PopStateEvent("popstate"));
}

/** The current path (and query), re-rendering on navigation. */
export function useLocation(): URL {
  const [href, setHref] = useState(window.location.href);
  useEffect(() => {
    const update = () => setHref(window.location.href);
    window.addEventListener("popstate", update);
    return () => window.removeEventListener("popstate", update);
  }, []);
  return new URL(href);
}

/** An in-app link: a real `<a href>` (so it opens in a new tab too) that navigates without a reload. */
export function Link(props: {
  href: string;
  children: ComponentChildren;
  class?: string;
  "aria-current"?: "page" | undefined;
}) {
  const { href, children } = props;
  return (
    <a
      class={props.class}
      aria-current={props["aria-current"]}
      href={href}
      onClick={(event) => {
        if (
          event.defaultPrevented ||
          event.button !== 0 ||
          event.metaKey ||
          event.ctrlKey ||
          event.shiftKey ||
          event.altKey
        )
          return;
        event.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}
