package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// Request bodies and query parameters.

// decodeBody checks a PUT or PATCH body against the JSON Schemas (when the server has them) and
// decodes it into v, an azure-sdk-for-go model. Fields the model does not know and values of the
// wrong type are rejected with 400 InvalidRequestContent, as ARM rejects them.
func (s *Server) decodeBody(q *armRequest, v json.Unmarshaler) *apiError {
	if len(q.body) == 0 {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: the body is empty.")
	}
	if s.schemas != nil && (q.route.kind == nil || !q.route.kind.noSchema) {
		s.mu.Lock()
		s.validated++
		s.mu.Unlock()
		if e := s.schemas.validate(q.route.typ, q.apiVersion, q.templateName(), q.body, q.r.Method == http.MethodPatch); e != nil {
			return e
		}
	}
	return decodeStrict(q.body, v)
}

// decodeStrict unmarshals body into v and rejects members v does not keep: the SDK models ignore
// unknown members, so the body is compared with v marshalled again.
func decodeStrict(body []byte, v json.Unmarshaler) *apiError {
	typeName := reflect.TypeOf(v).Elem().Name()
	if err := json.Unmarshal(body, v); err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent",
			"The request content was invalid and could not be deserialized as %s: %v", typeName, err)
	}
	var sent, kept any
	again, err := json.Marshal(v)
	if err != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "re-encoding %s: %v", typeName, err)
	}
	if json.Unmarshal(body, &sent) != nil || json.Unmarshal(again, &kept) != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: not JSON.")
	}
	if p := unknownMember(sent, kept, ""); p != "" {
		return newError(http.StatusBadRequest, "InvalidRequestContent",
			"The request content was invalid and could not be deserialized: could not find member '%s' of a %s body (JSON pointer %s); remove it or "+
				"check its spelling.",
			p[strings.LastIndex(p, "/")+1:], typeName, p)
	}
	return nil
}

// unknownMember returns the JSON pointer of the first non-null member of sent missing from kept.
func unknownMember(sent, kept any, path string) string {
	switch sv := sent.(type) {
	case map[string]any:
		kv, _ := kept.(map[string]any)
		for _, k := range sortedKeys(sv) {
			if sv[k] == nil {
				continue
			}
			kk, ok := kv[k]
			if !ok {
				return path + "/" + k
			}
			if p := unknownMember(sv[k], kk, path+"/"+k); p != "" {
				return p
			}
		}
	case []any:
		ka, _ := kept.([]any)
		for i, e := range sv {
			p := path + "/" + strconv.Itoa(i)
			if i >= len(ka) {
				return p
			}
			if p := unknownMember(e, ka[i], p); p != "" {
				return p
			}
		}
	}
	return ""
}

// page cuts a list answer: it returns the range of items to send and the nextLink (nil on the last
// page). The skip token is the offset of the page.
func (s *Server) page(q *armRequest, total int) (start, end int, next *string, e *apiError) {
	if tok := q.r.URL.Query().Get("$skiptoken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 {
			return 0, 0, nil, newError(http.StatusBadRequest, "InvalidSkipToken", "The skip token '%s' is not valid.", tok)
		}
		start = min(n, total)
	}
	end = min(start+s.opts.PageSize, total)
	if end < total {
		v := q.r.URL.Query()
		v.Set("$skiptoken", strconv.Itoa(end))
		link := s.url + q.r.URL.Path + "?" + v.Encode()
		next = &link
	}
	return start, end, next, nil
}

// expand returns the $expand query value, rejecting values other than allowed.
func expand(q *armRequest, allowed ...string) (string, *apiError) {
	v := q.r.URL.Query().Get("$expand")
	if v != "" && !contains(allowed, v) {
		return "", newError(http.StatusBadRequest, "InvalidParameter", "The value '%s' of $expand is not supported here; use one of %q.", v, allowed)
	}
	return v, nil
}

// rejectFilter refuses $filter, which the server does not evaluate: silently ignoring it would
// return more than the client asked for.
func rejectFilter(q *armRequest) *apiError {
	if f := q.r.URL.Query().Get("$filter"); f != "" {
		return newError(http.StatusBadRequest, "InvalidParameter", "armtest does not evaluate $filter (%q): list without it and filter the answer.", f)
	}
	return nil
}

// clone deep-copies an SDK model through its JSON form.
func clone[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("armtest: encoding %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("armtest: decoding %T: %v", v, err))
	}
	return out
}

// mergePatch applies an RFC 7386 JSON merge patch to doc, as ARM applies a PATCH body.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
		} else {
			d[k] = mergePatch(d[k], v)
		}
	}
	return d
}

// queryBool reads an optional boolean query parameter.
func queryBool(q *armRequest, name string) (bool, *apiError) {
	v := q.r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, newError(http.StatusBadRequest, "InvalidParameter", "The query parameter %s=%q is not a boolean; use true or false.", name, v)
	}
	return b, nil
}

// absoluteURL is the server URL of an ARM path and query.
func (s *Server) absoluteURL(path string, query url.Values) string {
	return s.url + path + "?" + query.Encode()
}

func deref(v *string) string {
	if v == nil {
		return "null"
	}
	return *v
}

func lastSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }
