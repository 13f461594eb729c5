package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"time"
)

// TSA asks an RFC 3161 time-stamping authority (可信时间戳) for tokens
// over SHA-256 digests: a TimeStampReq over HTTP POST
// (application/timestamp-query, RFC 3161 section 3.4), the token of its
// granted TimeStampResp kept as DER. The token is a CMS SignedData the
// TSA signs; anyone checks it with the TSA's certificate and public tools
// (openssl ts -verify), without yidu.
type TSA struct {
	url    string
	client *http.Client
}

// NewTSA returns the TSA at rawURL (http or https); client nil: one
// with a 30 s timeout.
func NewTSA(rawURL string, client *http.Client) (*TSA, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ledger: tsa url %q: want http(s)://host/…", rawURL)
	}
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &TSA{url: rawURL, client: client}, nil
}

var (
	oidSHA256     = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSignedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidTSTInfo    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4}
)

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type messageImprint struct {
	HashAlgorithm algorithmIdentifier
	HashedMessage []byte
}

type timeStampReq struct {
	Version        int
	MessageImprint messageImprint
	Nonce          *big.Int `asn1:"optional"`
	CertReq        bool     `asn1:"optional,default:false"`
}

type pkiStatusInfo struct {
	Status       int
	StatusString asn1.RawValue  `asn1:"optional"`
	FailInfo     asn1.BitString `asn1:"optional"`
}

type timeStampResp struct {
	Status         pkiStatusInfo
	TimeStampToken asn1.RawValue `asn1:"optional"`
}

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"explicit,tag:0"`
}

type encapContentInfo struct {
	EContentType asn1.ObjectIdentifier
	EContent     []byte `asn1:"explicit,tag:0"`
}

type signedData struct {
	Version          int
	DigestAlgorithms asn1.RawValue
	EncapContentInfo encapContentInfo
	Rest             asn1.RawValue `asn1:"optional"`
}

// tstInfo is RFC 3161 section 2.4.2's TSTInfo up to its nonce (the tsa
// name and extensions after it are not read).
type tstInfo struct {
	Version        int
	Policy         asn1.ObjectIdentifier
	MessageImprint messageImprint
	SerialNumber   *big.Int
	GenTime        time.Time `asn1:"generalized"`
	Accuracy       accuracy  `asn1:"optional"`
	Ordering       bool      `asn1:"optional"`
	Nonce          *big.Int  `asn1:"optional"`
}

type accuracy struct {
	Seconds int `asn1:"optional"`
	Millis  int `asn1:"optional,tag:0"`
	Micros  int `asn1:"optional,tag:1"`
}

// maxTSAAnswer bounds a TSA's answer (a token is a few kB).
const maxTSAAnswer = 1 << 20

// Stamp asks the TSA for a token over digest (SHA-256, 32 bytes) and
// returns it (DER) once it checks that the token states that digest and
// the request's nonce.
func (t *TSA) Stamp(ctx context.Context, digest []byte) ([]byte, error) {
	if len(digest) != sha256.Size {
		return nil, fmt.Errorf("ledger: tsa: digest of %d bytes, want %d", len(digest), sha256.Size)
	}
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, fmt.Errorf("ledger: tsa: nonce: %w", err)
	}
	req, err := asn1.Marshal(timeStampReq{Version: 1, MessageImprint: messageImprint{
		HashAlgorithm: algorithmIdentifier{Algorithm: oidSHA256, Parameters: asn1.NullRawValue}, HashedMessage: digest},
		Nonce: nonce, CertReq: true})
	if err != nil {
		return nil, fmt.Errorf("ledger: tsa: request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(req))
	if err != nil {
		return nil, fmt.Errorf("ledger: tsa: %w", err)
	}
	hr.Header.Set("Content-Type", "application/timestamp-query")
	resp, err := t.client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("ledger: tsa: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTSAAnswer))
	if err != nil {
		return nil, fmt.Errorf("ledger: tsa: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ledger: tsa: HTTP %d", resp.StatusCode)
	}
	var tr timeStampResp
	if rest, err := asn1.Unmarshal(body, &tr); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("ledger: tsa: not a TimeStampResp: %v", err)
	}
	// 0 granted, 1 grantedWithMods (RFC 3161 section 2.4.2).
	if tr.Status.Status > 1 || len(tr.TimeStampToken.FullBytes) == 0 {
		return nil, fmt.Errorf("ledger: tsa: refused (status %d)", tr.Status.Status)
	}
	info, err := ParseTimestamp(tr.TimeStampToken.FullBytes)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(info.Digest, digest) {
		return nil, errors.New("ledger: tsa: the token stamps another digest")
	}
	// The nonce binds the reply to this request (RFC 3161 section 2.4.2:
	// it must be the request's): a token of an earlier request over the
	// same digest, replayed, states another time and another nonce.
	if info.Nonce == nil || info.Nonce.Cmp(nonce) != 0 {
		return nil, errors.New("ledger: tsa: the token does not carry this request's nonce (a replayed or foreign reply)")
	}
	return tr.TimeStampToken.FullBytes, nil
}

// Timestamp is what a token states (its TSTInfo): the digest stamped and
// when. ParseTimestamp does not check the TSA's signature: openssl ts
// -verify (docs/evidence.md) does, with the TSA's certificate.
type Timestamp struct {
	Digest []byte
	Time   time.Time
	Serial *big.Int
	// Nonce is the request's nonce the TSA copied (nil: none).
	Nonce *big.Int
}

// ParseTimestamp reads a token's TSTInfo.
func ParseTimestamp(token []byte) (Timestamp, error) {
	var ci contentInfo
	if _, err := asn1.Unmarshal(token, &ci); err != nil || !ci.ContentType.Equal(oidSignedData) {
		return Timestamp{}, fmt.Errorf("ledger: tsa token: not a CMS SignedData: %v", err)
	}
	var sd signedData
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil || !sd.EncapContentInfo.EContentType.Equal(oidTSTInfo) {
		return Timestamp{}, fmt.Errorf("ledger: tsa token: no TSTInfo: %v", err)
	}
	var ti tstInfo
	if _, err := asn1.Unmarshal(sd.EncapContentInfo.EContent, &ti); err != nil {
		return Timestamp{}, fmt.Errorf("ledger: tsa token: TSTInfo: %w", err)
	}
	if !ti.MessageImprint.HashAlgorithm.Algorithm.Equal(oidSHA256) {
		return Timestamp{}, errors.New("ledger: tsa token: not a SHA-256 imprint")
	}
	return Timestamp{Digest: ti.MessageImprint.HashedMessage, Time: ti.GenTime.UTC(), Serial: ti.SerialNumber, Nonce: ti.Nonce}, nil
}
