package curator

import "github.com/curatorproject/curator/curator/internal/leader"

// SwarmEngine is the Docker engine a curator reads and changes the Swarm
// through (Config.Docker; curator/internal/leader's swarm part calls it).
type SwarmEngine = leader.SwarmEngine

// JoinTokenEnv is the environment variable `curator agent join` reads its
// token from (a group's machines get theirs there).
const JoinTokenEnv = leader.JoinTokenEnv
