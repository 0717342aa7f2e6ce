//go:build !linux

package main

// devFollowParent: only Linux can tie dev's life to its parent's.
func devFollowParent() {}
