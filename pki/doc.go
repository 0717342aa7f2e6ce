// Package pki is the cluster's public key infrastructure: the cluster CA, the
// etcd CA beneath it, the certificates of nodes and admins, and join tokens.
//
// # Trust layout
//
//	root CA ("cluster CA", 10 years, self-signed)
//	├── node certificates        O=node,      CN=<node ID>   (node API)
//	├── admin certificates       O=admin,     CN=<name>      (management API)
//	└── etcd CA (intermediate)
//	    └── etcd certificates    O=consensus, CN=<node ID>   (etcd peer + client)
//
// Every certificate holds a node ID (or an admin's name) as its common name
// and a role as its only organisation; [Identity] reads them back. Servers
// decide who may talk to them by the CA they trust: the node and management
// APIs trust the root, etcd trusts only the etcd CA. A worker's node
// certificate therefore chains to the root but is refused by etcd, since etcd's
// trust anchor is the intermediate, not the root (Go accepts any certificate
// in a pool of roots as an anchor, intermediate or not).
//
// All keys are ECDSA P-256. Server certificates carry IP SANs so that clients
// can dial by address and still verify the server.
//
// # Node IDs
//
// A node's ID is derived from its public key ([NodeID]): the first 15 bytes
// of the SHA-256 of the key's PKIX DER, in lowercase base32 without padding,
// 24 characters. A node keeps its key for life, so its ID never changes and
// nobody can claim it without the key.
//
// # Join tokens
//
// A token ([Token]) reads CUR1-<CA fingerprint>-<secret>. The fingerprint is
// the lowercase hex SHA-256 of the root CA certificate's DER: the joining node
// checks it against the CA the cluster presents before it trusts anything
// else. The secret is 32 random bytes in lowercase base32 without padding (52
// characters); the leader compares it in constant time ([SecretEqual]).
package pki
