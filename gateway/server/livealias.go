package server

import (
	"github.com/labstack/echo/v4"

	"github.com/uncaged/workflow/gateway/presence"
)

// The original dashboard opens a thread's live view at
// /api/<client>/threads/<id>/live?key=..., without the clients/ segment:
// a bug of its own, which no route of the original gateway matched. Here
// that path is served as /api/clients/<client>/threads/<id>/live, so the
// original dashboard's live view works against this gateway.
//
// It is unambiguous because the alias's first segment is a machine's name
// only when it is none of the gateway's own: every /api route begins with
// one of reservedAPISegments, and a name spelled like one of them is a
// 404 here, whatever the credentials (such a machine stays reachable at
// /api/clients/<name>/...). The alias serves this one path and the GET
// (and HEAD) of it only; any other /api/<x>/... stays a 404.

// reservedAPISegments are the first segments of the gateway's /api
// routes (TestReservedSegmentsCoverTheRoutes keeps the list whole).
var reservedAPISegments = map[string]bool{"gateway": true, "clients": true, "agents": true}

// liveAlias rewrites the alias to the proxied route it stands for, or
// answers 404 for a name that is reserved or invalid.
func (g *Gateway) liveAlias(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		name, id := c.Param("name"), c.Param("id")
		if reservedAPISegments[name] || !presence.ValidName(name) {
			return noSuchRoute(c)
		}
		rest := "threads/" + id + "/live"
		r := c.Request()
		r.URL.Path = "/api/clients/" + name + "/" + rest
		r.URL.RawPath = ""
		c.SetParamNames("name", "*")
		c.SetParamValues(name, rest)
		return next(c)
	}
}
