package client

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/curatorproject/curator/internal/atomicfile"
)

// CacheSuffix is appended to a config file's path to name its manager cache:
// config.yaml → config.yaml.managers.json. Keeping the whole config name
// makes two configs in one folder keep two caches.
const CacheSuffix = ".managers.json"

// CachePath is where the client caches the manager list of the config at
// configPath.
func CachePath(configPath string) string { return configPath + CacheSuffix }

// managerCache is the file the client writes after a successful call: the
// managers the cluster reported, so that a later run still finds the cluster
// once every manager the config names is gone.
type managerCache struct {
	ClusterID string    `json:"cluster_id"`
	Managers  []string  `json:"managers"`
	Updated   time.Time `json:"updated"`
}

// readCache returns the cached managers for clusterID, or nil if there is no
// usable cache. A cache for another cluster (the config was replaced) is
// ignored, not an error: the cache is only ever a hint.
func readCache(path, clusterID string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var c managerCache
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if clusterID != "" && c.ClusterID != clusterID {
		return nil, fmt.Errorf("%s is for cluster %q, not %q", path, c.ClusterID, clusterID)
	}
	return slices.DeleteFunc(c.Managers, func(s string) bool { return s == "" }), nil
}

func writeCache(path, clusterID string, managers []string, now time.Time) error {
	data, err := json.MarshalIndent(managerCache{ClusterID: clusterID, Managers: managers, Updated: now.UTC()}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}
