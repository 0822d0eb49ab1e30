package main

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/uncaged/workflow/gateway/presence"
)

// decodeEndpoints reads GET /api/gateway/endpoints.
func decodeEndpoints(resp *http.Response) ([]presence.Endpoint, error) {
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("endpoints: %s", resp.Status)
	}
	var eps []presence.Endpoint
	err := json.NewDecoder(resp.Body).Decode(&eps)
	return eps, err
}
