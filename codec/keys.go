// Package codec keeps card data out of Temporal: an AES-256-GCM payload
// codec that every payguard client and worker puts in front of the
// default data converter, the key ring it encrypts with, and the codec
// server the Temporal UI decodes through (docs/design.md §9).
//
// The ciphers are the standard library's crypto/aes and crypto/cipher: the
// well-kept choice, with no dependency to track.
package codec

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Where keys come from (docs/design.md §6).
const (
	// KeysEnv holds the key ring inline: entries "id:base64-key" separated
	// by commas, the first the current one. It wins over the key file.
	KeysEnv = "PAYGUARD_CODEC_KEYS"
	// KeyFileEnv is the default of --codec-key-file.
	KeyFileEnv = "PAYGUARD_CODEC_KEY_FILE"
	// DevKeyFile is where `make codec-key` and the demo keep a development
	// key ring generated on first use, relative to the module root. It is
	// git-ignored; a real deployment sets KeysEnv or KeyFileEnv.
	DevKeyFile = ".payguard/codec-keys"
	// KeySize is AES-256's key length in bytes.
	KeySize = 32
)

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Key is one AES-256 key and the id payloads name it by.
type Key struct {
	ID     string
	Secret []byte
}

// Keys is a key ring: Current encrypts, every key (Current included)
// decrypts, so a key can be rotated by putting a new one first and keeping
// the old ones until no history needs them.
type Keys struct {
	Current Key
	all     map[string][]byte
	ids     []string
}

// IDs lists the ring's key ids, the current one first (for logs: ids are
// not secret).
func (k Keys) IDs() []string { return append([]string(nil), k.ids...) }

// ParseKeys reads a key ring: entries "id:base64-key" separated by commas
// or newlines, blank lines and lines starting with # ignored; the first
// entry is the current key.
func ParseKeys(text string) (Keys, error) {
	keys := Keys{all: map[string][]byte{}}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, entry := range strings.Split(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			id, encoded, ok := strings.Cut(entry, ":")
			if !ok || !keyIDPattern.MatchString(id) {
				return Keys{}, fmt.Errorf("codec key entry %d: want id:base64-key with an id of letters, digits, . _ -", len(keys.ids)+1)
			}
			secret, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil || len(secret) != KeySize {
				return Keys{}, fmt.Errorf("codec key %q: want %d bytes in standard base64 (e.g. openssl rand -base64 32)", id, KeySize)
			}
			if _, dup := keys.all[id]; dup {
				return Keys{}, fmt.Errorf("codec key %q is listed twice", id)
			}
			keys.all[id] = secret
			keys.ids = append(keys.ids, id)
			if len(keys.ids) == 1 {
				keys.Current = Key{ID: id, Secret: secret}
			}
		}
	}
	if len(keys.ids) == 0 {
		return Keys{}, errors.New("codec key ring is empty")
	}
	return keys, nil
}

// LoadKeys reads the key ring from the inline value (KeysEnv) when it is
// set, else from file. The error says how to provide one.
func LoadKeys(inline, file string) (Keys, error) {
	if strings.TrimSpace(inline) != "" {
		k, err := ParseKeys(inline)
		if err != nil {
			return Keys{}, fmt.Errorf("%s: %w", KeysEnv, err)
		}
		return k, nil
	}
	if file == "" {
		return Keys{}, fmt.Errorf("no payload codec key: set %s or --codec-key-file (env %s); for development `make codec-key` writes one to %s", KeysEnv, KeyFileEnv, DevKeyFile)
	}
	raw, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Keys{}, fmt.Errorf("no payload codec key: %s does not exist; set %s or --codec-key-file (env %s), or for development run `make codec-key`", file, KeysEnv, KeyFileEnv)
	}
	if err != nil {
		return Keys{}, fmt.Errorf("codec key file: %w", err)
	}
	k, err := ParseKeys(string(raw))
	if err != nil {
		return Keys{}, fmt.Errorf("codec key file %s: %w", file, err)
	}
	return k, nil
}

// NewKey returns a fresh random key entry "id:base64-key".
func NewKey(id string) string {
	secret := make([]byte, KeySize)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	return id + ":" + base64.StdEncoding.EncodeToString(secret)
}

// EnsureDevKeyFile creates path with one fresh key (id "dev-1") unless it
// exists, readable by its owner only, and reports whether it created it.
func EnsureDevKeyFile(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	text := "# payguard development payload codec keys, generated on first use: never commit,\n" +
		"# never use in production. First line encrypts; every line decrypts.\n" + NewKey("dev-1") + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // created meanwhile by another process
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
