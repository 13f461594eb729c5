// Package rfc3161 verifies RFC 3161 timestamp tokens (可信时间戳) over a
// message: that the token's CMS signature verifies with the TSA
// certificate it carries, that its message imprint is the hash of the
// message, and, given trusted roots, that the certificate chains to one
// of them and may stamp time. The ledger (`yidu evidence verify`) and
// evidence (`yidu evidence check`) share it. The CMS parsing and
// signature check are github.com/digitorus/timestamp's and
// github.com/digitorus/pkcs7's.
package rfc3161

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// Token is what a verified token states.
type Token struct {
	// Time is the TSA's genTime: when it saw the imprint.
	Time time.Time
	// Hash is the imprint's hash function (SHA-256 for yidu's requests).
	Hash   crypto.Hash
	Serial *big.Int
	// TSA is the subject of the certificate that signed the token.
	TSA string
	// RootChecked: the certificate chained to a trusted root.
	RootChecked bool
}

// Verify checks token (a TimeStampToken, DER) over message: its CMS
// signature with the certificate it carries (a token without one is
// refused: nothing would be checked), its imprint the hash of message by
// the token's own hash function (SHA-256 or stronger: a SHA-1 imprint is
// refused), and, when roots is not nil, the signer's certificate chained
// to roots at the token's time and allowed to stamp time (extended key
// usage timeStamping).
func Verify(token, message []byte, roots *x509.CertPool) (tok Token, err error) {
	// A token comes from a pack anyone may hand in: a parser's panic on
	// hostile bytes is a refusal, never a crash of check or verify.
	defer func() {
		if v := recover(); v != nil {
			tok, err = Token{}, fmt.Errorf("timestamp token: malformed (%v)", v)
		}
	}()
	ts, err := timestamp.Parse(token)
	if err != nil {
		return Token{}, fmt.Errorf("timestamp token: not a valid signed token: %w", err)
	}
	if len(ts.Certificates) == 0 {
		return Token{}, errors.New("timestamp token: carries no TSA certificate, its signature cannot be checked")
	}
	switch ts.HashAlgorithm {
	case crypto.SHA256, crypto.SHA384, crypto.SHA512:
	default:
		return Token{}, fmt.Errorf("timestamp token: imprint by %v, want SHA-256 or stronger", ts.HashAlgorithm)
	}
	h := ts.HashAlgorithm.New()
	h.Write(message)
	if sum := h.Sum(nil); !bytes.Equal(sum, ts.HashedMessage) {
		return Token{}, fmt.Errorf("timestamp token: stamps %v %x, not this message's (%x): a token of another message", ts.HashAlgorithm, ts.HashedMessage, sum)
	}
	out := Token{Time: ts.Time.UTC(), Hash: ts.HashAlgorithm, Serial: ts.SerialNumber}
	p7, err := pkcs7.Parse(token)
	if err != nil {
		return Token{}, fmt.Errorf("timestamp token: %w", err)
	}
	if signer := p7.GetOnlySigner(); signer != nil {
		out.TSA = signer.Subject.String()
	} else {
		out.TSA = ts.Certificates[0].Subject.String()
	}
	if roots != nil {
		inter := x509.NewCertPool()
		for _, c := range p7.Certificates {
			inter.AddCert(c)
		}
		if err := p7.VerifyWithOpts(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: out.Time,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}); err != nil {
			return Token{}, fmt.Errorf("timestamp token: the TSA certificate %s does not chain to a trusted root: %w", out.TSA, err)
		}
		out.RootChecked = true
	}
	return out, nil
}

// Roots reads trusted roots from PEM.
func Roots(pem []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate")
	}
	return p, nil
}
