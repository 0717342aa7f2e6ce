// Package consensus runs the embedded etcd of one node and gives the curator
// the membership operations it needs.
//
// A [Service] owns one etcd member (go.etcd.io/etcd/server/v3/embed). Its
// [Service.Run] is a supervised runnable: it starts etcd, waits until it is
// ready, publishes a [Status] (starting, learner, voter, stopped) that others
// can [Service.Watch], and runs until its context ends or etcd fails. The
// member's name is the node's ID. Peer traffic (PORT+1) and client traffic
// (PORT+2) use mutual TLS with certificates from the etcd CA, an
// intermediate of the cluster CA: a node certificate from the root cannot
// reach etcd.
//
// # Lifecycle
//
// Bootstrap ([ModeBootstrap]): the first node founds a single-member
// cluster. Every other member joins it.
//
// Join as a learner ([ModeJoin]): the curator leader adds the node as a
// learner with [AddLearner], which returns [JoinParams] (the member list and
// the cluster ID); it hands them to the node, whose Run starts etcd with
// them. The learner replicates the log without voting. Once it has caught
// up, the leader promotes it with [PromoteLearner] (which retries while etcd
// says the learner is not in sync), and the node's status turns from
// Learner to Voter.
//
// Why learners first: adding a voter raises the quorum at once, before the
// new member has any data or is even running. With three voters, adding a
// fourth that takes a minute to catch up (or never starts) means a single
// further failure loses quorum. A learner does not count towards the quorum,
// so a slow or broken newcomer cannot hurt the cluster; it only becomes a
// voter once it can pull its weight.
//
// Restart ([ModeRestart], and every mode whose data dir already holds a
// member): etcd takes its identity and membership from the data dir. A data
// dir holds a member when it has an etcd write-ahead log (DataDir/member/wal,
// etcd's own test); then Run always restarts from it, whatever the mode, and
// it refuses ([ErrOtherCluster]) a data dir whose member has another node's
// name, or that belongs to another cluster than the join parameters name.
// ModeRestart is the zero value and never founds or joins a cluster, so a
// node that lost its data cannot fork the cluster by accident.
//
// Leave ([Service.Leave]): the member hands away etcd leadership if it has
// it, removes itself through the other voters, stops, and deletes its data
// dir, so the machine can join again from scratch.
//
// Removed while down: a member removed from the cluster while its node was
// down can never serve again; when it restarts its peers turn it away and
// etcd stops. Run detects this and returns [ErrRemoved] promptly, without
// disturbing the cluster (its peers refuse its messages). The cure is to wipe
// and join again.
//
// # Helpers for the curator leader
//
// [Members], [AddLearner], [PromoteLearner], [RemoveMember], [Leader] and
// [MoveLeader] take a *clientv3.Client of the cluster ([NewClient], or
// [Service.Client] for the member beside the curator).
package consensus
