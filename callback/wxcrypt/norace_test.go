//go:build !race

package wxcrypt

const raceEnabled = false
